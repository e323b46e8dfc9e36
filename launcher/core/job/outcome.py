"""A training job's outcome as its driver reads it back, whatever the framework: goodput, the
compile cache, the checkpoint tiers' saves, each start, the restarts and their causes, what was
trained, the evals and the loss curve, and what the chips cost. The summary prints it and
writes it into the job's result record (launcher.runtime.job.summary)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.core.job.goodput import Goodput
from launcher.core.tpu.preemption import Restart
from launcher.core.tpu.prices import JobCost


@dataclass(frozen=True)
class Start:
    """One start (the first, or one after a restart) as it ran."""

    slices: int  # TPU slices it got (an elastic job runs on fewer than planned)
    workers: int
    first_step: int | None
    last_step: int | None
    # From the worker group's start to its first step: restore, data, compile.
    seconds_to_first_step: float | None
    batch_tokens: list[float]  # the global batch in tokens, as MaxText reported it
    megascale: dict[str, str]  # MEGASCALE_* its workers saw
    capacity: str | None  # how GKE provided rank 0's node (None: not known)
    restored_from: str | None  # the memory tier: where its restore read its copy
    timeline: dict[str, Any] | None  # launcher.core.job.goodput.startup_timeline's (None: no step)


@dataclass(frozen=True)
class Trained:
    """What the chips' time bought: each step once, and the tokens MaxText counted in them (0
    where it reports none: a PyTorch job)."""

    steps: int
    tokens: int


@dataclass(frozen=True)
class Outcome:
    """The run's outcome as the driver reads it; the summary adds its cost."""

    goodput: Goodput
    compile_cache: dict[str, Any]
    saves: dict[str, dict[str, Any]]  # launcher.core.job.goodput.saves_by_tier's
    starts: list[Start]
    restarts: list[Restart]
    trained: Trained
    evals: list[tuple[int, float]]  # (after step, eval loss), the last computation of each
    sparkline: str | None = None  # the loss curve
    plot: str | None = None  # its PNG, next to the TensorBoard logs
    cost: JobCost | None = None
    no_cost: str = "-"  # why there is no cost

    @property
    def capacity(self) -> str | None:
        """The capacity the latest start that knew one ran on (None: not known)."""
        known = [s.capacity for s in self.starts if s.capacity]
        return known[-1] if known else None
