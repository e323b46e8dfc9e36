"""A hang, as the job's watchdog decides it: no step, eval or save finished on a host for longer
than a bound derived from the measured step time, once the start's first step is done (a
compile, a restore and MaxText's ahead-of-time compile of the eval step all come before it, so a
slow first compile never counts). The hosts' heartbeats say which of them are alive but waiting
(in a collective whose peer never came) and which are frozen (no thread of theirs runs: stopped,
swapping, or stuck holding the GIL).

The watchdog itself runs on every host (launcher.runtime.train.hang_watchdog); the failure policy
that charges its restarts to --max_hangs runs in Ray Train's controller
(launcher.runtime.job.hang_policy); the restart's cause in the summary comes from
launcher.core.tpu.preemption.restarts."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

# Each host's watchdog thread writes its heartbeat this often; a heartbeat older than
# FROZEN_AFTER_S means the host's threads do not run. Both well under any bound a user sets:
# a frozen host is named as such only when the bound is longer than FROZEN_AFTER_S.
HEARTBEAT_S = 3.0
FROZEN_AFTER_S = 15.0
# How long a live host that fired waits for the reporter (the lowest live rank, which reads
# the frozen hosts' stacks) before its process ends: the first host to end ends the attempt.
REPORT_WAIT_S = 60.0
# The exit status of a host's process that ended its attempt for a hang.
HANG_EXIT_CODE = 75
# The steps whose times the bound is derived from: the recent ones, as the progress line's ETA.
RECENT_STEPS = 10


@dataclass(frozen=True)
class HangBound:
    """--hang_timeout_s and --hang_step_factor: the bound is the larger of the floor and the
    factor times the median recent step time; a floor of 0 turns the watchdog off."""

    floor_s: float
    step_factor: float

    @property
    def on(self) -> bool:
        return self.floor_s > 0

    def seconds(self, step_seconds: Sequence[float]) -> float:
        recent = list(step_seconds)[-RECENT_STEPS:]
        median = statistics.median(recent) if recent else 0.0
        return max(self.floor_s, self.step_factor * median)

    def describe(self, step_seconds: Sequence[float]) -> str:
        recent = list(step_seconds)[-RECENT_STEPS:]
        median = statistics.median(recent) if recent else 0.0
        return (
            f"{self.seconds(step_seconds):.0f}s: the larger of --hang_timeout_s={self.floor_s:g} "
            f"and --hang_step_factor={self.step_factor:g} x the median step time {median:.2f}s"
        )


def overdue(
    bound: HangBound, step_seconds: Sequence[float], last_progress: float | None, now: float
) -> float | None:
    """Seconds since the host's last progress when that is past the bound, else None. No step
    yet in this start (`step_seconds` empty or `last_progress` None): never overdue."""
    if not bound.on or not step_seconds or last_progress is None:
        return None
    gap = now - last_progress
    return gap if gap > bound.seconds(step_seconds) else None


@dataclass(frozen=True)
class Heartbeat:
    """What a host's watchdog says of it every HEARTBEAT_S: who it is and its last step."""

    rank: int
    pid: int
    node_id: str
    node_ip: str
    step: int | None  # the last step this host completed in this start
    progress_at: float | None  # when (wall clock) it last completed a step, eval or save
    beat_at: float  # when this heartbeat was written (wall clock)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Heartbeat:
        return cls(**d)

    def frozen(self, now: float) -> bool:
        return now - self.beat_at > FROZEN_AFTER_S

    def describe(self, now: float) -> str:
        step = f"step {self.step}" if self.step is not None else "no step yet"
        since = f", {now - self.progress_at:.0f}s ago" if self.progress_at is not None else ""
        state = (
            f"frozen: no heartbeat for {now - self.beat_at:.0f}s"
            if self.frozen(now)
            else "alive, waiting"
        )
        return f"host {self.rank}: {step}{since}; {state} (pid {self.pid} on {self.node_ip})"


def reporter(heartbeats: Sequence[Heartbeat], now: float) -> int | None:
    """The rank that reads the frozen hosts' stacks: the lowest live one."""
    live = [h.rank for h in heartbeats if not h.frozen(now)]
    return min(live) if live else None


def stacks_file(step: int | None, rank: int, pid: int) -> str:
    """A host's stacks under the run's hangs/ directory: by the step it was in, the host and
    its process (a run that hangs at the same step twice keeps both)."""
    at = f"step-{step + 1}" if step is not None else "before-step-0"
    return f"{at}-host-{rank}-pid-{pid}.txt"
