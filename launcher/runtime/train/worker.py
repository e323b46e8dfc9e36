"""What every JaxTrainer worker (one per host) runs: MaxText's own train.main, unchanged."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from absl import flags as absl_flags

from launcher.core.job.checkpoint_tiers import tier_plan
from launcher.core.job.events import format_elastic, format_preempted, format_restart
from launcher.core.job.goodput import Attempt
from launcher.core.job.hangs import HangBound
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.maxtext.deferred_imports import maxtext_imports
from launcher.core.tpu.capacity import CapacityItem
from launcher.core.tpu.elastic import SliceSizing
from launcher.runtime.cluster.node_capacity import capacity_here
from launcher.runtime.job import kv as job_kv
from launcher.runtime.periodic import every
from launcher.runtime.train import memory_tier
from launcher.runtime.train.preemption import Notice, NoticeRelay, after_preemption_stop

if TYPE_CHECKING:
    from launcher.runtime.train.progress import ProgressTracker


class MaxTextStopped(RuntimeError):
    """MaxText ended its train loop early and called it graceful (its StopTraining), for a
    reason that is no end: a data iterator that failed or ran out. The job must fail, not
    succeed with steps missing."""


# Multi-slice coordination that libtpu reads when the TPU backend starts. Ray sets them from
# the live worker group on more than one slice and sets none on one; a pod can still carry a
# value from when the job had more slices (the chart declares MEGASCALE_NUM_SLICES for the
# TPU webhook), and libtpu would then wait for slices that are gone.
MEGASCALE_PREFIX = "MEGASCALE_"


def cpu_devices() -> bool:
    return os.environ.get("JAX_PLATFORMS", "").split(",")[0] == "cpu"


def argv_for_this_host(argv: list[str], overrides: dict[str, str] | None = None) -> list[str]:
    """MaxText's argv for this start: the sizing's overrides for the slices it got replace the
    same keys, and a slice whose devices are CPUs (the local simulation, CPU-only clusters)
    implies MaxText's cpu hardware mode and Grain reading in the training process (its worker
    processes would compete with training for the same few cores, and each eval starts its
    own anew: 12-27 s a step measured on 2 cores); what the user set explicitly always wins."""
    overrides = overrides or {}
    argv = [a for a in argv if a.partition("=")[0] not in overrides]
    argv += [f"{k}={v}" for k, v in overrides.items()]
    if cpu_devices():
        given = {a.partition("=")[0] for a in argv}
        implied = {"hardware": "cpu", "grain_worker_count": "0", "grain_worker_count_eval": "0"}
        argv += [f"{k}={v}" for k, v in implied.items() if k not in given]
    return argv


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


def quiet_orbax() -> None:
    """Orbax logs a dozen INFO lines per host per checkpoint and buries MaxText's own lines;
    its warnings and errors still show. LAUNCHER_ORBAX_INFO=1 keeps everything."""
    if not os.environ.get("LAUNCHER_ORBAX_INFO"):
        logging.getLogger("absl").addFilter(_drop_orbax_info)


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


def train_loop_per_worker(config: WorkerConfig) -> None:
    """MaxText's train.main on this host, with the shared bookkeeping (`started`) reading its
    log lines."""
    quiet_orbax()
    with started(config, jax_compiles=True) as start:
        tracker = start.tracker
        sizing = config.sizings.get(start.slices)
        argv = argv_for_this_host(
            config.argv,
            (sizing.simulated_overrides if cpu_devices() else sizing.overrides) if sizing else None,
        )
        if memory_tier.uses_memory_tier(argv):
            argv = memory_tier.host_argv(argv, start.slices, cpu_devices())
            tiers = tier_plan(MaxTextArgs.parse(argv[1:]))
            tracker.tier_of_save = lambda step: tiers.tier_of_save(
                step, forced=step == config.steps - 1 or tracker.stopped_for_preemption
            )
        absl_logger = logging.getLogger("absl")
        absl_logger.addHandler(tracker)
        recorder = None
        try:
            # Imported here: jax must not be imported before the backend set up
            # jax.distributed.
            with maxtext_imports():
                from maxtext.trainers.pre_train import train as maxtext_train

            if config.record_examples_in:
                recorder = _record_examples(Path(config.record_examples_in), start.rank)
            # Grain reads its own absl flags, which MaxText's app.run would have parsed.
            absl_flags.FLAGS.mark_as_parsed()
            if tracker.tier_of_save is not None:
                memory_tier.install(_on_restore(start, recorder), Path(config.run_dir or "."))
            maxtext_train.main(argv)
        finally:
            if recorder is not None:
                recorder.close()
            absl_logger.removeHandler(tracker)
    if tracker.failed_stop is not None:
        last = tracker.steps[-1].step if tracker.steps else None
        raise MaxTextStopped(
            f"MaxText stopped training {'before step 0' if last is None else f'after step {last}'}"
            f" of {config.steps}: {tracker.failed_stop}"
        )
    saved = tracker.last_saved
    if tracker.stopped_for_preemption and (saved is None or saved + 1 < config.steps):
        tracker.say(
            f"launcher: step {saved} is committed on the preemption notice; this host waits for "
            "Ray Train to restart the job at the notice's deadline"
        )
        after_preemption_stop(start.relay, saved)
    if start.rank == 0:
        publish_summary(config.summary_key, tracker.summary())


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


def _on_restore(start: WorkerStart, recorder) -> Callable[[int, str, float], None]:
    """What a host does when the memory tier restored a step: its example record goes on from
    the step after it (not after the bucket's latest), and rank 0 says where it came from."""

    def restored(step: int, source: str, seconds: float) -> None:
        if recorder is not None:
            recorder.step = step + 1
        if start.rank == 0:
            start.tracker.restored(step, source, seconds)

    return restored


def _record_examples(run_dir: Path, rank: int):
    """MaxText resumes at the step after the run's latest committed checkpoint: so does the
    record of this start."""
    from launcher.core.job.checkpoints import committed_steps
    from launcher.runtime.train.example_record import ExampleRecorder, install, record_path

    done = committed_steps(run_dir)
    recorder = ExampleRecorder(
        record_path(run_dir, time.time_ns(), rank), done[-1] + 1 if done else 0
    )
    install(recorder)
    return recorder


def _train_context() -> object:
    """Ray Train's context of this worker, which Ray's preemption watcher writes to."""
    from launcher.runtime.borrowed.ray import train_context

    return train_context()


def _preemption_line(summary_key: str, tracker) -> Callable[[int], None] | None:
    """What rank 0 says at the first step of a restart that followed a preemption notice."""
    starts = sorted(a.started_at for a in read_attempts(summary_key))
    since = starts[-1] if starts else 0.0  # the start before this one (not yet published)
    notices = [n for n in read_notices(summary_key) if n["at"] >= since]
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


def read_notices(key: str) -> list[dict]:
    """Every preemption notice a host of the job saw, oldest first."""
    return sorted(job_kv.records(job_kv.JobKeys(key).notice()).values(), key=lambda n: n["at"])


def read_hangs(key: str) -> list[dict]:
    """Every hang a host's watchdog recorded, oldest first
    (launcher.runtime.train.hang_watchdog)."""
    return sorted(job_kv.records(job_kv.JobKeys(key).hang()).values(), key=lambda h: h["at"])


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


def _drop_orbax_info(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or "/orbax/" not in record.pathname


_put = job_kv.put


def publish_summary(key: str, summary: dict) -> None:
    """Hands rank 0's numbers to the driver (Ray Train keeps metrics only with checkpoints)."""
    _put(key, summary)


def read_summary(key: str) -> dict:
    return job_kv.get(key) or {}


def read_attempts(key: str) -> list[Attempt]:
    """Every start's events (the first and each restart), in Ray's KV store on the head: a
    killed host's events survive it, up to its last publish, and its last step."""
    found = []
    keys = job_kv.JobKeys(key)
    for name, record in job_kv.records(keys.attempt()).items():
        attempt = Attempt.from_json(record)
        started = name.rsplit("/", 1)[-1]  # the attempt's key
        if last := job_kv.get(keys.last_step(started)):
            attempt.last_step = last["step"]
        found.append(attempt)
    return found


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
