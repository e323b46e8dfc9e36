"""The figures a training job exports while it runs, as Ray metrics: one list, read by the job
(launcher.runtime.job.metrics records them) and by the Grafana dashboard
(launcher.core.job.dashboard, whose JSON the chart ships).

Ray's metrics API sends them through each node's metrics agent, with Ray's own metrics, on the
port KubeRay names `metrics` (8080); Ray's exporter prefixes every application metric with
`ray_`, so `tpu_launcher_step` is scraped as `ray_tpu_launcher_step`. Names and units follow
Prometheus' conventions: seconds, bytes, ratios (0..1) and `_total` for counters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RAY_PREFIX = "ray_"  # what Ray's exporter puts before every application metric
# Every series of a job carries these: which run (MaxText's run_name), on which slice (as
# Cloud TPU names it; `cpu-<hosts>x<devices>` for a CPU-only slice) and which Ray job.
JOB_LABELS = ("run", "slice", "job_id")


@dataclass(frozen=True)
class JobMetric:
    name: str  # as the job records it (Prometheus: RAY_PREFIX + name)
    kind: Literal["gauge", "counter"]
    help: str
    labels: tuple[str, ...] = ()  # beyond JOB_LABELS

    @property
    def prometheus_name(self) -> str:
        return RAY_PREFIX + self.name

    @property
    def tag_keys(self) -> tuple[str, ...]:
        return JOB_LABELS + self.labels


# Rank 0 records these as MaxText logs each step and each save.
STEP = JobMetric(
    "tpu_launcher_step", "gauge", "The last step MaxText completed (steps done: this + 1)."
)
STEPS = JobMetric(
    "tpu_launcher_steps_total",
    "counter",
    "Steps computed, each start's own (a restart computes the steps since its checkpoint again).",
)
STEP_TIME = JobMetric(
    "tpu_launcher_step_time_seconds", "gauge", "The last step's time, MaxText's own measure."
)
TOKENS = JobMetric(
    "tpu_launcher_tokens_per_second_per_device",
    "gauge",
    "Tokens per second per device in the last step (MaxText's Tokens/s/device).",
)
TFLOPS = JobMetric(
    "tpu_launcher_tflops_per_second_per_device",
    "gauge",
    "Model TFLOP/s per device in the last step (MaxText's TFLOP/s/device).",
)
MFU = JobMetric(
    "tpu_launcher_mfu_ratio",
    "gauge",
    "Model FLOPs utilization: TFLOP/s per device over the device's peak bf16 TFLOP/s from the "
    "TPU table. Only on TPU devices (a CPU standing in for a chip has no such peak).",
)
LOSS = JobMetric("tpu_launcher_loss", "gauge", "The last step's training loss.")
EVAL_LOSS = JobMetric(
    "tpu_launcher_eval_loss",
    "gauge",
    "The last held-out loss MaxText computed (eval_interval; perplexity is its exponential).",
)
CHECKPOINT_SAVES = JobMetric(
    "tpu_launcher_checkpoint_saves_total", "counter", "Checkpoint saves MaxText started."
)
CHECKPOINT_STEP = JobMetric(
    "tpu_launcher_checkpoint_step", "gauge", "The step of the last checkpoint save started."
)
CHECKPOINT_SAVE_TIME = JobMetric(
    "tpu_launcher_checkpoint_save_seconds",
    "gauge",
    "What the last save blocked training: the step after it beyond a steady step (an "
    "asynchronous save's upload goes on behind the steps).",
)
# The driver records these every REPORT_EVERY_S from every start's records, and once at the end.
CHECKPOINT_SIZE = JobMetric(
    "tpu_launcher_checkpoint_size_bytes",
    "gauge",
    "The size of the latest committed checkpoint in the bucket.",
)
CHECKPOINT_COMMITTED = JobMetric(
    "tpu_launcher_checkpoint_committed_step",
    "gauge",
    "The latest committed checkpoint's step: where a restart resumes.",
)
GOODPUT = JobMetric(
    "tpu_launcher_goodput_ratio",
    "gauge",
    "Productive step time over the job's wall time so far (the summary's goodput).",
)
GOODPUT_PART = JobMetric(
    "tpu_launcher_goodput_part_seconds",
    "gauge",
    "Where the job's wall time went so far, by part: startup, compile, productive, checkpoint, "
    "restarts, other (they add up to the wall time).",
    labels=("part",),
)
WALL = JobMetric("tpu_launcher_wall_seconds", "gauge", "The job's wall time so far.")
RESTARTS = JobMetric(
    "tpu_launcher_restarts_total",
    "counter",
    "Restarts of the worker group by cause: preempted (charged to --max_preemptions), hung (the "
    "hang watchdog ended the attempt: --max_hangs) or failed (--max_failures).",
    labels=("cause",),
)

METRICS = (
    STEP,
    STEPS,
    STEP_TIME,
    TOKENS,
    TFLOPS,
    MFU,
    LOSS,
    EVAL_LOSS,
    CHECKPOINT_SAVES,
    CHECKPOINT_STEP,
    CHECKPOINT_SAVE_TIME,
    CHECKPOINT_SIZE,
    CHECKPOINT_COMMITTED,
    GOODPUT,
    GOODPUT_PART,
    WALL,
    RESTARTS,
)
# How often the driver reports goodput, restarts and the checkpoint's size (rank 0 writes the
# records those come from every 10 s); Ray's agents export every 10 s by default.
REPORT_EVERY_S = 10.0
