"""`python -m launcher.runtime hf-import`: a Hugging Face model directory (config.json,
*.safetensors, the tokenizer) of a family MaxText computes (launcher.runtime.models.families) as
MaxText's parameter checkpoint under imports/<name>/, which a job loads with `--from <name>`. It
is the job `tpu-launcher import` submits.

The conversion is MaxText's own (`maxtext.checkpoint_conversion`): its per-family name and
layout tables, its hooks (the query kernel takes Hugging Face's 1/sqrt(head_dim) out of
attention, Llama 3.1's rotary pairs are interleaved in MaxText and halves in Hugging Face,
experts stacked on their own axis), MaxText's abstract model for every target shape and its own
checkpoint writer. Only the driver is ours: `to_maxtext.main` knows a model by the name in its
table (and its sizes with it) and reads tensors through torch; this reads the directory's own
config.json and its tensors as numpy, so any size of a family converts, without torch.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from launcher.core.errors import UsageError
from launcher.core.job.events import format_result, format_summary_title
from launcher.core.job.run_dir import output_dir
from launcher.core.job.run_requests import ImportRequest, check_request
from launcher.core.maxtext.model_imports import (
    IMPORT_RECORD,
    PARAMS_ITEMS,
    TOKENIZER_SUBDIR,
    ImportRecord,
    hub_model,
    import_dir,
)
from launcher.runtime.models.conversion_host import conversion_bytes, run_where_memory_is
from launcher.runtime.models.families import (
    MAXTEXT_CONVERTER,
    conversion_tables,
    family_of,
    maxtext_keys,
    stacking_axis,
)
from launcher.runtime.models.hf_hub import download

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "tokenizer.model", "generation_config.json", "chat_template.jinja")  # fmt: skip


def source_dir(source: str) -> Path:
    """The model directory as this host sees it: absolute, or relative to the bucket's mount."""
    path = Path(source) if source.startswith(("/", "./", "../")) else Path(output_dir()) / source
    if not (path / "config.json").is_file():
        hub = source.count("/") == 1 and not source.startswith(("/", "."))
        raise UsageError(
            "SOURCE",
            f"no Hugging Face model at {path} (no config.json)",
            (
                f"{source!r} may be a Hub id: import hf://{source} to download it in the "
                "cluster (a gated model needs the chart's ray.hfToken), or run `hf "
                f"download {source} --local-dir NAME` where you have the token, copy NAME into "
                "the bucket (gcloud storage cp -r NAME gs://BUCKET/hf/) and import hf/NAME"
                if hub
                else "copy the model directory (config.json, *.safetensors, tokenizer files) "
                "into the bucket and name it relative to the bucket (hf/NAME)"
            ),
        )
    return path


def tensor_reader(directory: Path) -> tuple[Callable[[str], np.ndarray], int]:
    """A reader of the directory's tensors by Hugging Face name (one safetensors file or an
    index of shards, memory-mapped), and their bytes on disk."""
    from safetensors import safe_open

    index = directory / "model.safetensors.index.json"
    if index.is_file():
        shard_of = json.loads(index.read_text())["weight_map"]
    elif (directory / "model.safetensors").is_file():
        with safe_open(directory / "model.safetensors", framework="np") as f:
            shard_of = dict.fromkeys(f.keys(), "model.safetensors")
    else:
        raise UsageError(
            "SOURCE",
            f"{directory} has no model.safetensors (nor its index)",
            "save the model with safe_serialization (the default of save_pretrained)",
        )
    size = sum((directory / s).stat().st_size for s in set(shard_of.values()))

    def read(name: str) -> np.ndarray:
        if name not in shard_of:
            raise UsageError(
                "SOURCE",
                f"{directory} has no tensor {name}, which a model of its config.json has",
                "copy the model whole: every *.safetensors shard and its index",
            )
        with safe_open(directory / shard_of[name], framework="np") as f:
            return f.get_tensor(name)

    return read, size


def maxtext_config(model: dict[str, str]):
    from maxtext.configs import pyconfig

    argv = ["hf-import", str(_base_yml()), *(f"{k}={v}" for k, v in model.items())]
    argv += ["run_name=hf-import", "hardware=cpu", "skip_jax_distributed_system=True"]
    return pyconfig.initialize(argv)


def _base_yml() -> Path:
    from launcher.core.maxtext.args import maxtext_configs_dir

    return maxtext_configs_dir() / "base.yml"


def to_maxtext_params(read: Callable[[str], np.ndarray], hf: dict, config) -> dict:
    """MaxText's parameter tree ({"params": {"decoder": ...}}) of the Hugging Face tensors."""
    import jax
    from maxtext.checkpoint_conversion.to_maxtext import get_maxtext_model_info

    family = family_of(hf)
    hf = {**hf, "head_dim": int(config.head_dim)}  # older config.json files leave it implied
    names, hooks = conversion_tables(family, hf, config, saving_to_hf=False)
    targets, treedef = get_maxtext_model_info(config)
    # A composite key, (MaxText keys), is one Hugging Face tensor MaxText keeps as several
    # (gpt-oss's gate_up_proj: wi_0 and wi_1); its hook stacks them on a last axis.
    composite = [keys for keys in names if isinstance(keys, tuple)]
    part_of = {k: (keys, i) for keys in composite for i, k in enumerate(keys)}
    composites: dict[tuple[str, ...], np.ndarray] = {}
    leaves: list[Any] = [None] * len(targets)
    for mt_key, (index, shape) in targets.items():
        if mt_key in names:
            value = _assemble(names[mt_key], read, hooks.get(mt_key), tuple(shape), config, mt_key)
        elif mt_key in part_of:
            keys, i = part_of[mt_key]
            if keys not in composites:
                stacked = (*shape, len(keys))
                composites[keys] = _assemble(names[keys], read, hooks.get(keys), stacked, config,
                                             mt_key)  # fmt: skip
            value = composites[keys][..., i]
        else:
            raise UsageError(
                "config.json",
                f"MaxText's model of this shape has {mt_key}, which its {family.tables_of} "
                "table maps from no Hugging Face tensor",
                MAXTEXT_CONVERTER,
            )
        if tuple(value.shape) != tuple(shape):
            raise AssertionError(f"{mt_key}: {value.shape} != {shape}")
        leaves[index] = value
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _assemble(source: Any, read: Callable[[str], np.ndarray], hooks, shape: tuple, config,
              mt_key: str) -> np.ndarray:  # fmt: skip
    """One MaxText tensor from its Hugging Face tensors: one name, or names nested one list per
    stacked axis (layers when scanned, experts; experts outermost), as MaxText's tables give
    them and where its converter (to_maxtext) puts those axes. numpy: the dtype stays."""
    from maxtext.checkpoint_conversion.utils.tensor_handling import (
        apply_hook_fns,
        nesting_depth,
        slice_shape,
        stacked_axes,
    )

    depth = nesting_depth(source)
    if depth == 0:
        return np.asarray(apply_hook_fns(read(source), shape, hooks))
    if depth == 1:  # layers on the scan axis; an unscanned layer's experts on axis 0
        axes: tuple[int, ...] = (stacking_axis(mt_key, config, len(shape)),)
    else:
        axes = tuple(stacked_axes(mt_key, config, depth))
    piece = slice_shape(shape, axes)

    def gather(keys: Any, level: int) -> np.ndarray:
        if level == depth:
            return np.asarray(apply_hook_fns(read(keys), piece, hooks))
        return np.stack([gather(k, level + 1) for k in keys])

    return np.moveaxis(gather(source, 0), tuple(range(depth)), axes)


def convert(source: Path, target: Path, model: dict[str, str]) -> tuple[int, str]:
    """Writes MaxText's checkpoint of `source` at target/0/items; its parameter count and
    dtype. The arrays are read and written on this host, in this one process."""
    import jax
    from maxtext.checkpoint_conversion.utils.utils import save_weights_to_checkpoint

    hf = json.loads((source / "config.json").read_text())
    config = maxtext_config(model)
    read, _ = tensor_reader(source)
    params = to_maxtext_params(read, hf, config)
    leaves = jax.tree_util.tree_leaves(params)
    save_weights_to_checkpoint(
        str(target), params, 1, config.checkpoint_storage_use_ocdbt,
        config.checkpoint_storage_use_zarr3, config=config,
    )  # fmt: skip
    return int(sum(a.size for a in leaves)), str(leaves[0].dtype)


def import_model(request: ImportRequest, on_this_host: bool = False) -> int:
    """The import, converted by a task on a host with the memory (on_this_host: in this
    process, where no Ray cluster is)."""
    check_request(request)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # reading and reshaping arrays: no device
    target = Path(import_dir(output_dir(), request.name))
    if (target / IMPORT_RECORD).is_file():  # before any download
        record = ImportRecord.from_json((target / IMPORT_RECORD).read_text())
        print(f"launcher: {target} exists (imported before from {record.source}); kept")
        _print_result(target, record)
        return 0
    hub, revision = hub_model(request.source), ""
    if hub is not None:
        revision = download(hub, Path(output_dir()) / hub.bucket_dir)
    source = source_dir(hub.bucket_dir if hub else request.source)
    hf = json.loads((source / "config.json").read_text())
    model = maxtext_keys(hf)
    print(f"launcher: import {source} ({hf['architectures'][0]}) to {target}", flush=True)
    started = time.monotonic()
    _, weight_bytes = tensor_reader(source)
    need = conversion_bytes(weight_bytes)
    staging = target.parent / f".{request.name}.tmp-{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    try:
        what = f"importing {weight_bytes / (1 << 30):.1f} GiB of weights"
        if on_this_host:
            parameters, dtype = convert(source, staging, model)
        else:
            parameters, dtype = run_where_memory_is(
                convert, (source, staging, model), need, what, "SOURCE"
            )
        tokenizer = staging / TOKENIZER_SUBDIR
        tokenizer.mkdir()
        for name in TOKENIZER_FILES:
            if (source / name).is_file():
                shutil.copy2(source / name, tokenizer / name)
        shutil.copy2(source / "config.json", staging / "config.json")
        record = ImportRecord(
            name=request.name,
            source=hub.repo if hub else str(source),
            architecture=hf["architectures"][0],
            model=model,
            parameters=parameters,
            dtype=dtype,
            seconds=round(time.monotonic() - started, 1),
            revision=revision,
        )
        (staging / IMPORT_RECORD).write_text(record.to_json())
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _print_result(target, record)
    return 0


def _print_result(target: Path, record: ImportRecord) -> None:
    print("\n" + format_summary_title("import"), flush=True)
    at = f" at commit {record.revision}" if record.revision else ""
    print(f"model:      {record.source}{at} ({record.architecture}, {record.dtype})")
    print(f"parameters: {record.parameters:,} at {target / PARAMS_ITEMS}")
    print("shape:      " + " ".join(f"{k}={v}" for k, v in record.model.items()))
    print(f"train it:   tpu-launcher submit -- --from={record.name} <config.yml> run_name=...")
    print(format_result({**json.loads(record.to_json()), "dir": str(target)}), flush=True)
