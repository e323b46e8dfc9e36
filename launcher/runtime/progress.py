"""Reads MaxText's per-step log line into numbers, for progress lines and the final summary."""

from __future__ import annotations

import logging
import os
import re
import sys
from dataclasses import dataclass, field

# MaxText's metric_logger: "completed step: 5, seconds: 0.060, TFLOP/s/device: 0.001,
# Tokens/s/device: 2133.760, total_weights: 512, loss: 5.960, ..."
STEP_LINE = re.compile(
    r"completed step: (?P<step>\d+), seconds: (?P<seconds>[\d.]+), "
    r"TFLOP/s/device: (?P<tflops>[\d.]+), Tokens/s/device: (?P<tokens>[\d.]+), "
    r"total_weights: [\d.]+, loss: (?P<loss>[-\d.naif]+)"
)


@dataclass
class StepRecord:
    step: int
    seconds: float
    tflops_per_device: float
    tokens_per_device: float
    loss: float


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
    )


@dataclass
class ProgressTracker(logging.Handler):
    """A logging handler that watches MaxText's step lines and prints one compact line each."""

    total_steps: int = 0
    echo: bool = True
    steps: list[StepRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        logging.Handler.__init__(self, level=logging.INFO)

    def __hash__(self) -> int:  # logging keeps handlers in sets
        return id(self)

    def emit(self, record: logging.LogRecord) -> None:
        rec = parse_step_line(record.getMessage())
        # MaxText's line can reach this logger more than once; count each step once.
        if rec is None or (self.steps and rec.step <= self.steps[-1].step):
            return
        self.steps.append(rec)
        if self.echo:
            line = (
                f"[progress] step {rec.step + 1}/{self.total_steps} loss {rec.loss:.4f} "
                f"step time {rec.seconds:.3f}s tokens/s/device {rec.tokens_per_device:.0f}\n"
            )
            # Straight to the file descriptor: Ray Train's print capture would show it twice.
            os.write(sys.stderr.fileno(), line.encode())

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
