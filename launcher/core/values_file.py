"""The TPU slices a chart values file asks for: one reader for preflight, the fake GKE node
pools and the tests. `ray.worker.tpu` is the training slice group, `saxml.modelServer.tpu` the
serving one; each is held to the TPU table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from launcher.core.errors import UsageError
from launcher.core.job.checkpoint_tiers import BUCKET, MEMORY
from launcher.core.release_facts import BucketMount, CpuSlice, IdleRelease, ReleaseFacts
from launcher.core.tpu.capacity import block_words
from launcher.core.tpu.preemption import DEFAULT_GRACE_S
from launcher.core.tpu.prices import checked_overrides
from launcher.core.tpu.slices import TpuSlices
from launcher.core.tpu.table import SliceShape, slice_shape, tpu_type

# Where in the values each slice group lives, and what turns it on.
TPU_BLOCKS = {
    "ray": ("ray", "worker", "tpu"),
    "saxml": ("saxml", "modelServer", "tpu"),
    "vllm": ("vllm", "tpu"),
}


def load_values(*paths: str | Path) -> dict[str, Any]:
    """Values files merged in Helm's order (maps merge, anything else: the later file wins). A
    file that is missing, is not YAML or is not a map is refused naming it (and the line), as
    Helm refuses it, before anything renders."""

    def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
        for key, value in over.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = value
        return base

    merged: dict[str, Any] = {}
    for path in paths:
        merge(merged, read_values_file(path))
    return merged


def read_values_file(path: str | Path) -> dict[str, Any]:
    """One values file's map, or a UsageError naming the file (and the line of a YAML error)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise UsageError(
            "--values", f"no values file {path}", "check the path (or name a preset: v6e-16)"
        ) from None
    except (IsADirectoryError, UnicodeDecodeError) as e:
        raise UsageError(
            "--values", f"{path} is not a values file ({e})", "name a YAML file"
        ) from e
    try:
        loaded = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = " ".join(filter(None, [e.context, e.problem]))
        raise UsageError(
            "--values", f"{where}: not valid YAML: {what}", "fix the YAML at that line"
        ) from None
    except yaml.YAMLError as e:
        raise UsageError("--values", f"{path}: not valid YAML: {e}", "fix the YAML") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise UsageError(
            "--values",
            f"{path} holds a {type(loaded).__name__}, not a map of chart values",
            "write it as helm's values files are: keys at the top (ray:, global:, ...)",
        )
    return loaded


def _block(values: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    node: object = values
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def tpu_blocks(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The enabled TPU blocks of values, as written, by component: "ray", "saxml", "vllm" (Ray
    is on unless disabled; a serving engine only when serving.engine names it, as in the
    chart)."""
    found = {}
    engine = (values.get("serving") or {}).get("engine", "")
    for component, path in TPU_BLOCKS.items():
        top, tpu = values.get(component, {}), _block(values, path)
        if component == "ray":
            enabled = top.get("enabled", True) if isinstance(top, dict) else False
        else:
            enabled = engine == component
        if enabled and tpu and tpu.get("enabled") is not False:
            found[component] = tpu
    return found


def block_shape(tpu: dict[str, Any]) -> SliceShape | None:
    """The slice one `tpu:` block names: `type` (v6e-16), or the long form generation +
    topology; `topology` / `chipsPerHost` choose among a name's shapes. The chart applies the
    same rule to the same table and also refuses derived keys that disagree (`helm template`)."""
    per_host = int(tpu["chipsPerHost"]) if tpu.get("chipsPerHost") else None
    if tpu.get("type"):
        shape = tpu_type(str(tpu["type"]), per_host)
        if tpu.get("topology") and str(tpu["topology"]) != shape.topology:
            raise UsageError(
                "topology",
                f"{tpu['topology']!r} is not a shape of {tpu['type']}",
                f"use {shape.topology}, or remove the topology",
            )
        return shape
    if tpu.get("generation") and tpu.get("topology"):
        return slice_shape(str(tpu["generation"]), str(tpu["topology"]), per_host)
    return None


def tpu_slices(values: dict[str, Any]) -> dict[str, TpuSlices]:
    """The enabled TPU slice groups of (merged) values, by component, held to the TPU table."""
    found = {}
    for component, tpu in tpu_blocks(values).items():
        shape = block_shape(tpu)
        if shape is not None:
            found[component] = TpuSlices(shape, int(tpu.get("slices") or 1))
    return found


def training_slices(values: dict[str, Any], path: str | Path) -> TpuSlices:
    """The training slice (ray.worker.tpu) a values file's values describe, for preflight."""
    slices = tpu_slices(values).get("ray")
    if slices is None:
        raise UsageError(
            "values",
            f"{path} describes no TPU worker group (ray.worker.tpu)",
            "name the slice in it (ray.worker.tpu.type: v6e-16), or pass --tpu=v6e-16",
        )
    return slices


def release_facts(values: dict[str, Any], release: str) -> ReleaseFacts:
    """What a release of these (merged) values tells its jobs, as the chart writes it
    (`tpu-stack.releaseFacts`; tests/chart/test_release_facts.py holds the two equal), for a
    release named `release` (its RayCluster's name derives from it)."""
    ray = _block(values, ("ray",)) or {}
    worker = _block(values, ("ray", "worker")) or {}
    tpu = _block(values, ("ray", "worker", "tpu")) or {}
    cpu = _block(values, ("ray", "worker", "cpu")) or {}
    checkpoints = _block(values, ("checkpoints",)) or {}
    gcsfuse = _block(values, ("global", "gcsfuse")) or {}
    cost = _block(values, ("cost",)) or {}
    slices = tpu_slices(values).get("ray") if tpu.get("enabled") else None
    tier = str(checkpoints.get("tier") or BUCKET)
    grace = worker.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S)
    after_s = tpu.get("releaseIdleAfterSeconds") if slices else None
    limit = ((worker.get("resources") or {}).get("limits") or {}).get("memory")
    return ReleaseFacts(
        slices=slices,
        cpu_slice=None
        if tpu.get("enabled")
        else CpuSlice(int(cpu["hosts"]), int(cpu["devicesPerHost"])),
        grace_seconds=None if grace is None else int(grace),
        capacities=tuple(block_words(tpu)) if slices else (),
        min_slices=int(tpu["minSlices"]) if slices and tpu.get("minSlices") else None,
        checkpoint_tier=tier,
        memory_volume=str(checkpoints["memorySize"])
        if slices and tier == MEMORY and checkpoints.get("memorySize")
        else None,
        memory_limit=None if limit in (None, "") else str(limit),
        bucket=BucketMount(str(gcsfuse.get("bucketName")), str(gcsfuse.get("mountPath")))
        if gcsfuse.get("enabled")
        else None,
        prices=checked_overrides(cost.get("pricesPerChipHour") or {}),
        region=str(cost.get("region") or ""),
        idle_release=IdleRelease(
            ray_cluster_name(ray, release), str(worker.get("groupName")), float(after_s)
        )
        if after_s
        else None,
        known=True,
    )


def ray_cluster_name(ray: dict[str, Any], release: str) -> str:
    """The RayCluster's name, as `tpu-stack.componentFullname` makes it for the ray block."""
    if ray.get("fullnameOverride"):
        return str(ray["fullnameOverride"]).removesuffix("-")
    name = str(ray.get("nameOverride") or "ray")
    return (release if name in release else f"{release}-{name}").removesuffix("-")
