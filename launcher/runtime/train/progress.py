"""Reads MaxText's per-step and checkpoint log lines into numbers: the progress lines, the
attempt's events for goodput, and the final summary."""

from __future__ import annotations

import logging
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from launcher.core.job.checkpoint_tiers import MEMORY
from launcher.core.job.events import (
    format_checkpoint,
    format_eval,
    format_progress,
    format_restored,
)
from launcher.core.job.goodput import Attempt, StepPoint

if TYPE_CHECKING:
    from launcher.runtime.job.metrics import StepMetrics

# MaxText's metric_logger: "completed step: 5, seconds: 0.060, TFLOP/s/device: 0.001,
# Tokens/s/device: 2133.760, total_weights: 512, loss: 5.960, ..."
STEP_LINE = re.compile(
    r"completed step: (?P<step>\d+), seconds: (?P<seconds>[\d.]+), "
    r"TFLOP/s/device: (?P<tflops>[\d.]+), Tokens/s/device: (?P<tokens>[\d.]+), "
    r"total_weights: (?P<weights>[\d.]+), loss: (?P<loss>[-\d.naif]+)"
)


@dataclass
class StepRecord:
    step: int
    seconds: float
    tflops_per_device: float
    tokens_per_device: float
    loss: float
    total_weights: float  # tokens the optimizer step learned from: the global batch in tokens


def parse_step_line(line: str) -> StepRecord | None:
    m = STEP_LINE.search(line)
    if not m:
        return None
    return StepRecord(
        step=int(m["step"]),
        seconds=float(m["seconds"]),
        tflops_per_device=float(m["tflops"]),
        tokens_per_device=float(m["tokens"]),
        loss=float(m["loss"]),
        total_weights=float(m["weights"]),
    )


def steps_logged(log: str) -> list[int]:
    """The steps MaxText's step lines in a whole log name, in log order (every host's)."""
    return [rec.step for line in log.splitlines() if (rec := parse_step_line(line))]


# MaxText's metric_logger._log_eval_metrics, once per eval (eval_interval), on every host:
# "Completed eval after train step 5, loss=3.646, perplexity=38.330, total_weights=844.0, ..."
EVAL_LINE = re.compile(
    r"Completed eval after train step (?P<step>\d+), loss=(?P<loss>[-\d.naif]+), "
    r"perplexity=(?P<perplexity>[-\d.naif]+)"
)


# MaxText's checkpointing.print_save_message, for a synchronous and an asynchronous save.
CHECKPOINT_LINE = re.compile(
    r"(?:Saved a checkpoint at step|Started an asynchronous checkpoint save for step) (\d+)"
)


# MaxText's train loop ends on its StopTraining exception as if the job were done, whatever the
# reason: a target eval loss reached, the preemption save below, or a data iterator that failed
# or ran out. Only the first two are an end; the others are the job's failure.
STOPPED_LINE = re.compile(r"Training stopped: (?P<reason>.*)")
TARGET_LOSS_STOP = "Target loss"


# MaxText's checkpointing._handle_post_checkpoint_preemption, once the save at the preemption sync
# step committed (the train loop then ends as if done).
PREEMPTION_STOP = "Job received termination signal (SIGTERM)"


@dataclass
class ProgressTracker(logging.Handler):
    """A logging handler on MaxText's logger: one compact `[progress]` line per step and a
    `[checkpoint]` line per save (rank 0 echoes them), and the attempt's events for goodput,
    handed to `publish` every `publish_every` seconds and at every checkpoint."""

    total_steps: int = 0
    echo: bool = True
    peak_tflops: float | None = None  # per device, where the TPU table knows it: MFU
    hardware_flops: bool = True  # False on CPU devices: TFLOP/s and MFU are left out
    attempt: Attempt | None = None
    publish: Callable[[Attempt], None] | None = None
    publish_every: float = 10.0
    steps: list[StepRecord] = field(default_factory=list)
    evals: list[tuple[int, float]] = field(default_factory=list)  # (after step, eval loss)
    stopped_for_preemption: bool = False
    failed_stop: str | None = None  # MaxText stopped early for this reason (not an end)
    last_saved: int | None = None  # the step of the last save MaxText logged
    on_first_step: Callable[[int], None] | None = None  # called once, with the step
    # When (wall clock) this host last finished a step, an eval or a save: the hang watchdog's
    # clock. None until the start's first step (compiles and restores come before it).
    progress_at: float | None = None
    metrics: StepMetrics | None = None  # rank 0's Ray metrics (None: off, or another rank)
    # The memory tier: which tier a save of a step went to (None: one tier, not said).
    tier_of_save: Callable[[int], str] | None = None
    _published_at: float = 0.0

    def __post_init__(self) -> None:
        logging.Handler.__init__(self, level=logging.INFO)

    def __hash__(self) -> int:  # logging keeps handlers in sets
        return id(self)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        rec = parse_step_line(message)
        if rec is None:
            if m := CHECKPOINT_LINE.search(message):
                self.checkpoint_done(int(m[1]))
            elif m := EVAL_LINE.search(message):
                self._eval(int(m["step"]), float(m["loss"]), float(m["perplexity"]))
            elif PREEMPTION_STOP in message:
                self.stopped_for_preemption = True
            elif m := STOPPED_LINE.search(message):
                reason = m["reason"]
                if TARGET_LOSS_STOP not in reason and PREEMPTION_STOP not in reason:
                    self.failed_stop = reason
            return
        self.step_done(rec)

    def step_done(self, rec: StepRecord) -> None:
        """A step finished on this host (MaxText's line, or a PyTorch script's report)."""
        # MaxText's line can reach this logger more than once; count each step once.
        if self.steps and rec.step <= self.steps[-1].step:
            return
        self.steps.append(rec)
        self.progress_at = time.time()
        if self.on_first_step is not None:
            self.on_first_step(rec.step)
            self.on_first_step = None
        now = time.time()
        if self.attempt is not None:
            self.attempt.steps.append(
                StepPoint(
                    rec.step, rec.seconds, now, rec.loss, rec.tokens_per_device, rec.total_weights
                )
            )
        if self.metrics is not None:
            self.metrics.step(
                rec.step, rec.seconds, rec.tokens_per_device, rec.tflops_per_device, rec.loss
            )
        self.say(self.progress_line(rec))
        if now - self._published_at >= self.publish_every:
            self.flush_events()

    def progress_line(self, rec: StepRecord) -> str:
        recent = [s.seconds for s in self.steps[-10:]]
        eta = max(0, self.total_steps - rec.step - 1) * statistics.median(recent)
        return format_progress(
            rec.step + 1,
            self.total_steps,
            rec.loss,
            rec.seconds,
            rec.tokens_per_device,
            rec.tflops_per_device if self.hardware_flops else None,
            rec.tflops_per_device / self.peak_tflops
            if self.peak_tflops and self.hardware_flops
            else None,
            eta,
            self.evals[-1][1] if self.evals else None,
        )

    def _eval(self, step: int, loss: float, perplexity: float) -> None:
        if self.evals and self.evals[-1][0] == step:
            return  # the same eval logged twice
        self.evals.append((step, loss))
        self._progressed()
        if self.attempt is not None:
            self.attempt.evals.append((step, loss))
        if self.metrics is not None:
            self.metrics.eval(step, loss)
        self.say(format_eval(step, loss, perplexity))
        self.flush_events()

    def checkpoint_done(self, step: int) -> None:
        """A save of `step` committed (MaxText's line, or a PyTorch script's save)."""
        self.last_saved = step
        self._progressed()
        tier = self.tier_of_save(step) if self.tier_of_save else None
        if self.attempt is not None:
            self.attempt.checkpoints.append((step, time.time()))
            if tier == MEMORY:
                self.attempt.memory_saves.append(step)
        if self.metrics is not None:
            self.metrics.checkpoint(step)
        self.say(format_checkpoint(step, tier))
        self.flush_events()

    def restored(self, step: int, source: str, seconds: float) -> None:
        """This start restored `step` from `source` in `seconds` (the memory tier's report:
        the whole restore, which Orbax's read events alone do not measure)."""
        if self.attempt is not None:
            self.attempt.restored_from = source
            self.attempt.restore_seconds = seconds
        self.say(format_restored(step, source))
        self.flush_events()

    def _progressed(self) -> None:
        """An eval or a save finished: the watchdog's clock starts again (after a first step)."""
        if self.progress_at is not None:
            self.progress_at = time.time()

    def say(self, line: str) -> None:
        if self.echo:
            # Straight to the file descriptor: Ray Train's print capture would show it twice.
            os.write(sys.stderr.fileno(), (line + "\n").encode())

    def flush_events(self) -> None:
        if self.publish is not None and self.attempt is not None:
            self.publish(self.attempt)
            self._published_at = time.time()

    def summary(self) -> dict:
        if not self.steps:
            return {"steps_this_run": 0}
        return {
            "first_step": self.steps[0].step,
            "last_step": self.steps[-1].step,
            "first_loss": self.steps[0].loss,
            "final_loss": self.steps[-1].loss,
            "steps_this_run": len(self.steps),
        }
