"""The job's figures as Ray metrics (launcher.core.job.metrics names them), live while it runs.

Rank 0 records each step and each save as MaxText logs them (`StepMetrics`). The driver, alive
for the whole job and every restart, records what spans the starts (goodput, restarts, the
committed checkpoint) from the records rank 0 already keeps in Ray's KV store, every
REPORT_EVERY_S and once more at the end with the summary's own figures (`JobReporter`).

A process's last values leave with it: Ray's core worker exports what it recorded when it
exits. The agent drops a gauge it has not been sent for two export intervals (about 20 s), and
a core worker sends a gauge only when it is recorded again, so each gauge's last value is
recorded again every REPORT_EVERY_S while its process runs (a checkpoint's size is set once per
save; a step's figures stop during a long compile or save). Counters stay until the agent
restarts.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.core.job import metrics as jm
from launcher.core.job.checkpoints import committed_steps
from launcher.core.job.outcome import Outcome
from launcher.core.job.run_dir import CHECKPOINTS_SUBDIR
from launcher.runtime.periodic import every


class JobMetrics:
    """Every job metric, tagged with the job's labels (run, slice, job_id)."""

    def __init__(self, labels: dict[str, str]) -> None:
        from ray.util.metrics import Counter, Gauge

        self.labels = labels
        self._metrics: dict[str, Any] = {}
        for metric in jm.METRICS:
            kind = Gauge if metric.kind == "gauge" else Counter
            self._metrics[metric.name] = kind(
                metric.name, description=metric.help, tag_keys=metric.tag_keys
            ).set_default_tags(labels)
        self._last: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._lock = threading.Lock()

    def set(self, metric: jm.JobMetric, value: float, **labels: str) -> None:
        self._metrics[metric.name].set(float(value), tags=labels or None)
        with self._lock:
            self._last[(metric.name, tuple(sorted(labels.items())))] = float(value)

    def refresh(self) -> None:
        """Records every gauge's last value again, so the agent keeps it."""
        with self._lock:
            last = list(self._last.items())
        for (name, labels), value in last:
            self._metrics[name].set(value, tags=dict(labels) or None)

    def keep_fresh(self, every_s: float = jm.REPORT_EVERY_S) -> threading.Event:
        """Refreshes every `every_s` on a thread of its own until the returned event is set."""
        return every(every_s, self.refresh, "metrics-refresh")

    def inc(self, metric: jm.JobMetric, value: float = 1.0, **labels: str) -> None:
        if value > 0:  # Ray's counters refuse 0
            self._metrics[metric.name].inc(float(value), tags=labels or None)


class StepMetrics:
    """Rank 0's per-step and per-save figures."""

    def __init__(self, metrics: JobMetrics, peak_tflops: float | None, hardware_flops: bool):
        self.metrics = metrics
        self.peak_tflops = peak_tflops if hardware_flops else None
        self._seconds: list[float] = []  # this start's steady steps (not after a save)
        self._saved: int | None = None
        self._first = True  # the first step of a start carries its start-up: never steady

    def step(self, step: int, seconds: float, tokens: float, tflops: float, loss: float) -> None:
        m = self.metrics
        m.set(jm.STEP, step)
        m.inc(jm.STEPS)
        m.set(jm.STEP_TIME, seconds)
        m.set(jm.TOKENS, tokens)
        m.set(jm.TFLOPS, tflops)
        if self.peak_tflops:
            m.set(jm.MFU, tflops / self.peak_tflops)
        m.set(jm.LOSS, loss)
        if self._saved is not None and step - 1 == self._saved:
            # The step after a save carries the save's blocking part (as goodput counts it).
            steady = statistics.median(self._seconds[-10:]) if self._seconds else seconds
            m.set(jm.CHECKPOINT_SAVE_TIME, max(0.0, seconds - steady))
        elif not self._first:
            self._seconds.append(seconds)
        self._first = False

    def eval(self, step: int, loss: float) -> None:
        del step  # the gauge's sample time says when
        self.metrics.set(jm.EVAL_LOSS, loss)

    def checkpoint(self, step: int) -> None:
        self._saved = step
        self.metrics.inc(jm.CHECKPOINT_SAVES)
        self.metrics.set(jm.CHECKPOINT_STEP, step)


class JobReporter:
    """The driver's figures: goodput, restarts by cause and the committed checkpoint, from
    `outcome()` (the summary's own computation) every REPORT_EVERY_S while the job runs."""

    def __init__(
        self,
        metrics: JobMetrics,
        outcome: Callable[[], Outcome],
        run_dir: Path,
        every_s: float = jm.REPORT_EVERY_S,
    ) -> None:
        self.metrics = metrics
        self.outcome = outcome
        self.run_dir = run_dir
        self.every_s = every_s
        self._restarts: dict[str, int] = {}
        self._committed = -1  # the committed step last reported (-1: none yet)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="job-metrics", daemon=True)

    def start(self) -> JobReporter:
        self._thread.start()
        return self

    def stop(self, outcome: Outcome | None = None) -> None:
        """Stops reporting; records `outcome` (the summary's) as the job's last figures."""
        self._stop.set()
        self._thread.join(timeout=self.every_s + 5)
        if outcome is not None:
            self.report(outcome)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.metrics.refresh()
                self.report(self.outcome())
            except Exception as e:  # a figure is never worth the job: say it, go on
                print(f"launcher: metrics not reported: {type(e).__name__}: {e}", file=sys.stderr)

    def report(self, outcome: Outcome) -> None:
        m, goodput = self.metrics, outcome.goodput
        m.set(jm.GOODPUT, goodput.goodput)
        m.set(jm.WALL, goodput.wall_seconds)
        for part, seconds in goodput.parts.items():
            m.set(jm.GOODPUT_PART, seconds, part=part)
        counts: dict[str, int] = {}
        for restart in outcome.restarts:
            counts[restart.cause] = counts.get(restart.cause, 0) + 1
        for cause, count in counts.items():
            m.inc(jm.RESTARTS, count - self._restarts.get(cause, 0), cause=cause)
        self._restarts = counts
        self._report_checkpoint()

    def _report_checkpoint(self) -> None:
        # Only saves newer than the one reported: every 10 s, each marker asked is a lookup.
        steps = committed_steps(self.run_dir, after=self._committed)
        if not steps:
            return
        self._committed = steps[-1]
        self.metrics.set(jm.CHECKPOINT_COMMITTED, steps[-1])
        self.metrics.set(
            jm.CHECKPOINT_SIZE, tree_bytes(self.run_dir / CHECKPOINTS_SUBDIR / str(steps[-1]))
        )


def tree_bytes(path: Path) -> int:
    """The bytes of every file under `path` (on the bucket's mount: one listing per save)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file gone between the listing and the stat
                total += os.stat(os.path.join(root, name)).st_size
    return total


def job_labels(run: str, slice_name: str) -> dict[str, str]:
    """The labels of every series of this job: run, slice and Ray's job submission id."""
    return {"run": run, "slice": slice_name, "job_id": submission_id()}


def submission_id() -> str:
    """The Ray job's submission id (what `ray job submit` and `tpu-launcher list` show), which
    Ray's job supervisor hands the driver in its job config; Ray's own job id otherwise."""
    import ray

    config = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}") or "{}")
    found = config.get("metadata", {}).get("job_submission_id")
    if found:
        return str(found)
    return ray.get_runtime_context().get_job_id() if ray.is_initialized() else "local"
