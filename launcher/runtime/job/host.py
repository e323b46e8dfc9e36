"""Every host's bookkeeping around its training, whatever the framework (MaxText's worker,
launcher.runtime.train.worker, and PyTorch's, launcher.runtime.torch.worker): the job's config
as the driver hands it, the start's slices, the attempt's events for goodput, the restart and
elastic lines, the last-step beacon, the hang watchdog and the preemption relay."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from launcher.core.job.events import format_elastic, format_preempted, format_restart
from launcher.core.job.goodput import Attempt
from launcher.core.job.hangs import HangBound
from launcher.core.tpu.capacity import CapacityItem
from launcher.core.tpu.elastic import SliceSizing
from launcher.runtime.cluster.node_capacity import capacity_here
from launcher.runtime.job import kv as job_kv
from launcher.runtime.periodic import every
from launcher.runtime.train.preemption import Notice, NoticeRelay

if TYPE_CHECKING:
    from launcher.runtime.train.progress import ProgressTracker


# Multi-slice coordination that libtpu reads when the TPU backend starts. Ray sets them from
# the live worker group on more than one slice and sets none on one; a pod can still carry a
# value from when the job had more slices (the chart declares MEGASCALE_NUM_SLICES for the
# TPU webhook), and libtpu would then wait for slices that are gone.
MEGASCALE_PREFIX = "MEGASCALE_"


def cpu_devices() -> bool:
    return os.environ.get("JAX_PLATFORMS", "").split(",")[0] == "cpu"


@dataclass(frozen=True)
class WorkerConfig:
    """What the driver hands every host's worker (Ray pickles it to each): the job, once."""

    argv: list[str]  # MaxText's argv, before a start's sizing overrides
    steps: int
    summary_key: str  # where the attempts and the summary go in Ray's KV store
    hosts_per_slice: int
    # Elastic jobs: MaxText's overrides per number of slices a start may get.
    sizings: dict[int, SliceSizing] = field(default_factory=dict)
    peak_tflops: float | None = None  # per device, where the TPU table knows it: MFU
    # The job's metrics labels (run, slice, job_id); None: no Ray metrics (--nometrics).
    metric_labels: dict[str, str] | None = None
    # --record_examples: the run's directory, under which each host records its batches.
    record_examples_in: str | None = None
    # The hang watchdog's bound (None: no watchdog) and where it writes the hosts' stacks.
    hang_bound: HangBound | None = None
    run_dir: str | None = None
    per_chip: bool = False  # one worker per chip (a PyTorch job), not per host


def slices_of_this_start(world_size: int, hosts_per_slice: int) -> int:
    return max(1, world_size // (hosts_per_slice or world_size))


def drop_stale_megascale(slices: int) -> dict[str, str]:
    """On one slice no MEGASCALE_* may be left from a larger group; returns what is in effect."""
    if slices == 1:
        for key in [k for k in os.environ if k.startswith(MEGASCALE_PREFIX)]:
            del os.environ[key]
    return {k: v for k, v in os.environ.items() if k.startswith(MEGASCALE_PREFIX)}


@dataclass
class WorkerStart:
    """One worker's share of a start of the worker group: its rank, the slices the start got,
    its progress tracker (rank 0 speaks for the group: its events are the job's) and the
    preemption relay."""

    rank: int
    slices: int
    tracker: ProgressTracker
    relay: NoticeRelay


@contextmanager
def started(
    config: WorkerConfig,
    *,
    jax_compiles: bool,
    deliver: Callable[[Notice], None] | None = None,
    record_start: bool = False,
) -> Iterator[WorkerStart]:
    """The bookkeeping every framework's worker shares around its training: the attempt's
    events for goodput (rank 0), the restart and elastic lines, Ray metrics, the last-step
    beacon, the hang watchdog and the preemption relay (to JAX, or to `deliver`); `jax_compiles`
    counts JAX's compile time and cache hits into the attempt; `record_start` records the
    attempt as it begins (a script may report no step: rank 0's host killed before the end would
    otherwise leave no trace of the start, and the restart would go uncounted). Everything stops
    on the way out."""
    import ray
    import ray.train

    from launcher.runtime.train.progress import ProgressTracker

    context = ray.train.get_context()
    rank = context.get_world_rank()
    slices = slices_of_this_start(context.get_world_size(), config.hosts_per_slice)
    sizing = config.sizings.get(slices)
    megascale = drop_stale_megascale(slices)
    tracker = ProgressTracker(
        total_steps=config.steps,
        echo=rank == 0,
        peak_tflops=config.peak_tflops,
        # TFLOP/s on CPU devices standing in for TPU chips mean nothing: left out.
        hardware_flops=not cpu_devices(),
    )
    beacon = fresh = None
    if rank == 0:  # rank 0 speaks for the worker group: its events are the job's
        tracker.attempt = Attempt(
            started_at=time.time(),
            workers=context.get_world_size(),
            slices=slices,
            megascale=megascale,
        )
        begun = time.time_ns()
        keys = job_kv.JobKeys(config.summary_key)
        key = keys.attempt(begun)
        earlier = len(job_kv.keys(keys.attempt()))
        if earlier:
            tracker.say(
                format_restart(earlier + 1, context.get_world_size(), slices, config.per_chip)
            )
            tracker.on_first_step = _preemption_line(config.summary_key, tracker)
        if sizing and len(config.sizings) > 1:
            tracker.say(
                format_elastic(slices, max(config.sizings), sizing.global_batch, sizing.overrides)
            )
        tracker.publish = lambda attempt: _put(key, attempt.to_json())
        if config.metric_labels is not None:
            from launcher.runtime.job.metrics import JobMetrics, StepMetrics

            metrics = JobMetrics(config.metric_labels)
            tracker.metrics = StepMetrics(metrics, config.peak_tflops, not cpu_devices())
            fresh = metrics.keep_fresh()
        if jax_compiles:
            _count_compile_time(tracker.attempt)
        beacon = _keep_last_step(keys.last_step(begun), tracker)
    watchdog = _watch_for_hangs(config, tracker, rank)
    capacity = capacity_here()  # read now: a notice leaves no time for the API server
    if tracker.attempt is not None and capacity is not None:
        tracker.attempt.capacity = capacity.word  # what prices the start's chips
    if record_start and tracker.publish is not None and tracker.attempt is not None:
        tracker.publish(tracker.attempt)
    on_notice = lambda notice: _on_notice(  # noqa: E731
        config.summary_key, rank, replace(notice, **_capacity_fields(capacity)), tracker
    )
    node = ray.get_runtime_context().get_node_id()
    relay = (
        NoticeRelay(_train_context(), node, on_notice, deliver, ready=lambda: True)
        if deliver is not None
        else NoticeRelay(_train_context(), node, on_notice)
    ).start()
    try:
        yield WorkerStart(rank, slices, tracker, relay)
    finally:
        relay.stop()
        for stop in (beacon, fresh, watchdog):
            if stop is not None:
                stop.set()
        if tracker.attempt is not None:
            tracker.attempt.ended_at = time.time()
            tracker.flush_events()


def _watch_for_hangs(config: WorkerConfig, tracker, rank: int) -> threading.Event | None:
    """Every host's hang watchdog (launcher.runtime.train.hang_watchdog); returns its stop."""
    if config.hang_bound is None or not config.hang_bound.on:
        return None
    import ray

    from launcher.runtime.train.hang_watchdog import HangWatchdog

    return HangWatchdog(
        config.hang_bound,
        tracker,
        config.summary_key,
        rank,
        ray.get_runtime_context().get_node_id(),
        ray.util.get_node_ip_address(),
        Path(config.run_dir) if config.run_dir else None,
    ).start()


def _train_context() -> object:
    """Ray Train's context of this worker, which Ray's preemption watcher writes to."""
    from launcher.runtime.borrowed.ray import train_context

    return train_context()


def _preemption_line(summary_key: str, tracker) -> Callable[[int], None] | None:
    """What rank 0 says at the first step of a restart that followed a preemption notice."""
    starts = sorted(a.started_at for a in job_kv.read_attempts(summary_key))
    since = starts[-1] if starts else 0.0  # the start before this one (not yet published)
    notices = [n for n in job_kv.read_notices(summary_key) if n["at"] >= since]
    if not notices:
        return None
    first = notices[0]
    left = max(0.0, first["deadline"] - first["at"]) if first.get("deadline") else None
    hosts = sorted({h for n in notices for h in n.get("hosts", [])})
    return lambda step: tracker.say(format_preempted(step, left, hosts))


def _capacity_fields(capacity: CapacityItem | None) -> dict:
    """What a notice records of the host's capacity."""
    if capacity is None:
        return {}
    return {"capacity": capacity.word, "preemptible": capacity.preemptible}


def _on_notice(summary_key: str, rank: int, notice: Notice, tracker) -> None:
    """Every host that sees the notice records it where the driver reads it (the one that
    sees it may be the one that goes); rank 0 also says it."""
    if rank == 0:
        tracker.say(f"launcher: {notice.describe()}")
    _put(job_kv.JobKeys(summary_key).notice(time.time_ns(), rank), notice.to_json())


# JAX's monitoring events for the parts of a compile: tracing, lowering, XLA's compile (which
# includes reading the persistent cache), and the cache's hits with the time each one saved.
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"


CACHE_SAVED_EVENT = "/jax/compilation_cache/compile_time_saved_sec"


# Orbax's whole restore, on the primary host (orbax/checkpoint/_src/logging/event_tracking.py).
RESTORE_EVENTS = (
    "/jax/orbax/read/total_duration_secs",
    "/jax/orbax/read/async/total_duration_secs",
)


def _count_compile_time(attempt: Attempt) -> None:
    import jax

    def duration(event: str, duration_secs: float, **_: str | int) -> None:
        if event in COMPILE_EVENTS:
            attempt.compile_seconds += duration_secs
            if not attempt.steps:
                attempt.startup_compile_seconds += duration_secs
        elif event == CACHE_SAVED_EVENT:
            attempt.compile_seconds_saved += duration_secs
        elif event in RESTORE_EVENTS:
            attempt.restore_seconds += duration_secs

    def count(event: str, **_: object) -> None:
        if event == CACHE_HIT_EVENT:
            attempt.compile_cache_hits += 1

    jax.monitoring.register_event_duration_secs_listener(duration)
    jax.monitoring.register_event_listener(count)


_put = job_kv.put


# How often rank 0 writes its last step: a step computed after it is counted short.
LAST_STEP_EVERY_S = 0.5


def _keep_last_step(key: str, tracker) -> threading.Event:
    """Writes the last step rank 0 logged to `key` whenever it changes, twice a second, off
    the training thread (the attempt's whole record goes every 10 s); returns its stop."""
    written = None

    def write() -> None:
        nonlocal written
        if tracker.steps and tracker.steps[-1].step != written:
            written = tracker.steps[-1].step
            _put(key, {"step": written, "at": time.time()})

    return every(LAST_STEP_EVERY_S, write, "last-step")
