"""What every JaxTrainer worker (one per host) runs: MaxText's own train.main, unchanged."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from absl import flags as absl_flags

from launcher.core.job.checkpoint_tiers import tier_plan
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.maxtext.deferred_imports import maxtext_imports
from launcher.runtime.job import kv as job_kv
from launcher.runtime.job.host import WorkerConfig, WorkerStart, cpu_devices, started
from launcher.runtime.train import memory_tier
from launcher.runtime.train.preemption import after_preemption_stop

if TYPE_CHECKING:
    pass


class MaxTextStopped(RuntimeError):
    """MaxText ended its train loop early and called it graceful (its StopTraining), for a
    reason that is no end: a data iterator that failed or ran out. The job must fail, not
    succeed with steps missing."""


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


def quiet_orbax() -> None:
    """Orbax logs a dozen INFO lines per host per checkpoint and buries MaxText's own lines;
    its warnings and errors still show. LAUNCHER_ORBAX_INFO=1 keeps everything."""
    if not os.environ.get("LAUNCHER_ORBAX_INFO"):
        logging.getLogger("absl").addFilter(_drop_orbax_info)


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
        job_kv.publish_summary(config.summary_key, tracker.summary())


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


def _drop_orbax_info(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or "/orbax/" not in record.pathname
