"""The logits MaxText's own model computes from an import's parameters, as a job would load
them: MaxText's loader (what load_parameters_path runs) reading what `import` wrote, in float32
with dot-product attention at the highest matmul precision, so a test can hold them against
Hugging Face's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from launcher.core.model_imports import ImportRecord
from launcher.runtime.hf_import import maxtext_config


def maxtext_logits(record: ImportRecord, items: Path, ids: list[int]) -> np.ndarray:
    import jax
    import jax.numpy as jnp
    from maxtext.utils import maxtext_utils
    from maxtext.utils.model_creation_utils import from_pretrained

    keys = {**record.model, "load_parameters_path": str(items), "max_target_length": str(len(ids))}
    keys |= {"attention": "dot_product", "dtype": "float32", "weight_dtype": "float32"}
    config = maxtext_config({**keys, "matmul_precision": "highest"})
    mesh = jax.sharding.Mesh(maxtext_utils.create_device_mesh(config), config.mesh_axes)
    model = from_pretrained(config, mesh=mesh)
    tokens = jnp.asarray([ids], dtype=jnp.int32)
    with jax.set_mesh(mesh):
        logits = model(
            tokens, jnp.arange(len(ids))[None], decoder_segment_ids=jnp.ones_like(tokens),
            enable_dropout=False,
        )  # fmt: skip
    return np.asarray(logits[0], dtype=np.float64)
