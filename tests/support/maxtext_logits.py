"""The logits MaxText's own model computes from an import's parameters, loaded as a training job
loads load_parameters_path (checkpointing.load_params_from_path, every collection of the
model's weights: DeepSeek's routing bias is one of its own), in float32 with dot-product
attention at the highest matmul precision, so a test can hold them against Hugging Face's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from launcher.core.maxtext.model_imports import ImportRecord
from launcher.runtime.models.hf_import import maxtext_config


def maxtext_logits(record: ImportRecord, items: Path, ids: list[int]) -> np.ndarray:
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from maxtext.common import checkpointing
    from maxtext.utils import maxtext_utils, model_creation_utils

    keys = {**record.model, "load_parameters_path": str(items), "max_target_length": str(len(ids))}
    keys |= {"attention": "dot_product", "dtype": "float32", "weight_dtype": "float32"}
    config = maxtext_config({**keys, "matmul_precision": "highest"})
    mesh = jax.sharding.Mesh(maxtext_utils.create_device_mesh(config), config.mesh_axes)
    create, abstract = model_creation_utils.create_nnx_abstract_model(config, mesh)
    # The model's weights, transient state left out, as the training loader is handed them
    # (checkpointing._abstract_params).
    transient = (nnx.RngState, nnx.Cache, nnx.Intermediate, nnx.BatchStat)
    weights = nnx.state(abstract).filter(lambda _, v: not isinstance(v, transient))
    loaded = checkpointing.load_params_from_path(
        config.load_parameters_path, weights, config.checkpoint_storage_concurrent_gb,
        config.checkpoint_storage_use_ocdbt, config.checkpoint_storage_use_zarr3,
    )  # fmt: skip
    tokens = jnp.asarray([ids], dtype=jnp.int32)
    with jax.set_mesh(mesh):
        model = create()
        nnx.update(model, loaded)
        logits = model(
            tokens, jnp.arange(len(ids))[None], decoder_segment_ids=jnp.ones_like(tokens),
            enable_dropout=False,
        )  # fmt: skip
    return np.asarray(logits[0], dtype=np.float64)
