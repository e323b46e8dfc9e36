"""What MaxText is told on each number of slices a job may get.

A multi-slice job spans slices over DCN. With `--min_slices` below `--num_slices` Ray Train's
elastic JaxTrainer starts (and restarts) it on as many whole slices as the cluster has, between
the two. Each start then needs MaxText's DCN parallelism for the slices it got, and, to keep the
global batch (per-device batch x devices x gradient accumulation) the same, more accumulation
steps on fewer slices. Both are worked out here once, at submission, for every size the job can
take, so a size that cannot keep the batch is refused before any TPU-hour is spent.

On the local cluster the slices are simulated: MaxText sees CPU devices, which carry no
`slice_index`, so it counts one slice of all the devices. There the DCN axis is folded into the
same ICI axis (data over slices becomes data over all devices): same mesh size, same batch.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from launcher.core.errors import UsageError
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.tpu.slices import Slices

GA_KEY = "gradient_accumulation_steps"
ALLOW_FLAG = "--allow_changing_batch"

# How long Ray Train waits for a worker group's slices before it decides the size again. After
# a slice is lost Ray first retries the old size (its nodes are not yet marked dead) and gives
# up only at this timeout (Ray's default 60 s); an elastic job has a smaller size to go to, and
# the sizes it asks for are the ones the cluster reports ready, so a shorter wait only cuts the
# time spent not training. A user's own RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S wins.
GROUP_START_TIMEOUT_ENV = "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"
ELASTIC_GROUP_START_TIMEOUT_S = 20


def shorten_group_start_wait(
    min_slices: int, max_slices: int, environ: MutableMapping[str, str]
) -> None:
    """For an elastic job, the shorter wait in the driver's environment (Ray Train hands it on
    to its controller); a fixed-size job has nowhere else to go and keeps Ray's."""
    if min_slices < max_slices:
        environ.setdefault(GROUP_START_TIMEOUT_ENV, str(ELASTIC_GROUP_START_TIMEOUT_S))


@dataclass(frozen=True)
class SliceSizing:
    """MaxText's overrides for a start on `slices` slices, and the global batch that gives."""

    slices: int
    overrides: dict[str, str]  # on TPU slices
    simulated_overrides: dict[str, str]  # on the local cluster's CPU-device slices
    global_batch: float  # sequences per optimizer step (per-device batch may be fractional)


def slice_axis(args: MaxTextArgs, max_slices: int) -> str:
    """The one DCN axis that spans the slices (MaxText's default: dcn_data_parallelism=-1)."""
    dcn = args.parallelism("dcn")
    spanning = {k: v for k, v in dcn.items() if v != 1}
    if len(spanning) == 1:
        ((key, value),) = spanning.items()
        if value in (-1, max_slices):
            return key
    if not spanning and max_slices == 1:
        return "dcn_data_parallelism"
    shown = ", ".join(f"{k}={v}" for k, v in spanning.items()) or "none"
    raise UsageError(
        "dcn parallelism",
        f"a job on a changing number of slices needs exactly one DCN axis that spans the "
        f"{max_slices} slices; found {shown}",
        "leave dcn_data_parallelism=-1 (MaxText's default) and every other dcn_*_parallelism=1",
    )


def _resolved(args: MaxTextArgs, kind: str, target: int) -> dict[str, int]:
    """The `kind` (ici or dcn) axes with MaxText's -1 filled in for `target` devices or slices
    (the parallelism was checked already)."""
    axes = args.parallelism(kind)
    fixed = 1
    for value in axes.values():
        fixed *= value if value != -1 else 1
    return {k: (target // fixed if v == -1 else v) for k, v in axes.items()}


def sizings(
    args: MaxTextArgs, slices: Slices, min_slices: int, allow_changing_batch: bool
) -> dict[int, SliceSizing]:
    """Every size from `min_slices` to the planned slices, each with what MaxText is told.
    Raises UsageError when a size cannot keep the global batch and that was not allowed."""
    max_slices = slices.num_slices
    if not 1 <= min_slices <= max_slices:
        raise UsageError(
            "min_slices",
            f"must be between 1 and --num_slices ({max_slices}), got {min_slices}",
            f"pass --min_slices=1 .. {max_slices} (or leave it out: the job needs every slice)",
        )
    # A fixed-size job keeps whatever DCN axes it chose; an elastic one resizes the one axis
    # that spans the slices.
    axis = slice_axis(args, max_slices) if min_slices < max_slices else None
    accumulation = int(args.get(GA_KEY) or 1)
    per_device = float(args.get("per_device_batch_size") or 1)
    # On the full job's slices the user's accumulation applies as given: the batch to keep.
    target_sequences = accumulation * max_slices
    result = {}
    for got in range(min_slices, max_slices + 1):
        steps, remainder = divmod(target_sequences, got)
        if remainder and not allow_changing_batch:
            sizes = ", ".join(
                str(s) for s in range(min_slices, max_slices + 1) if target_sequences % s
            )
            raise UsageError(
                "min_slices",
                f"on {sizes} of {max_slices} slices the global batch cannot stay the same: "
                f"{GA_KEY}={accumulation} x {max_slices} slices is not a multiple of {sizes}",
                f"pick {GA_KEY} so that {GA_KEY} x {max_slices} divides by every size from "
                f"{min_slices} to {max_slices} (e.g. {GA_KEY}="
                f"{_smallest_exact(accumulation, min_slices, max_slices)}), raise --min_slices, "
                f"or pass {ALLOW_FLAG} to let the batch shrink on those sizes",
            )
        steps = max(1, steps)
        extra = {GA_KEY: str(steps)} if steps != accumulation else {}
        batch = per_device * slices.devices_per_slice * got * steps
        dcn = {axis: str(got)} if axis else {}
        result[got] = SliceSizing(
            got,
            {**dcn, **extra},
            {**_folded_overrides(args, slices, {**_resolved(args, "dcn", got), **dcn}), **extra},
            batch,
        )
    return result


def _smallest_exact(accumulation: int, min_slices: int, max_slices: int) -> int:
    """The smallest multiple of `accumulation` whose batch every size can keep."""
    candidate = accumulation
    while any(candidate * max_slices % s for s in range(min_slices, max_slices + 1)):
        candidate += accumulation
    return candidate


def _folded_overrides(args: MaxTextArgs, slices: Slices, dcn: dict[str, Any]) -> dict[str, str]:
    """Simulated slices: MaxText counts one slice of every CPU device, so each DCN axis that
    spans slices becomes the same ICI axis (the ICI fill resolved per slice first)."""
    if slices.num_slices == 1:
        return {}  # nothing spans slices: the user's mesh as given
    folded = {k: str(v) for k, v in _resolved(args, "ici", slices.devices_per_slice).items()}
    for key, value in dcn.items():
        if int(value) == 1:
            continue
        same_ici = "ici_" + key.removeprefix("dcn_")
        folded[same_ici] = str(int(folded.get(same_ici, 1)) * int(value))
        folded[key] = "1"
    return folded
