"""What every JaxTrainer worker (one per host) runs: MaxText's own train.main, unchanged."""

from __future__ import annotations

import json
import logging
import os

KV_NAMESPACE = "tpu-launcher"


def train_loop_per_worker(config: dict) -> None:
    import ray.train

    from launcher.runtime.progress import ProgressTracker

    argv = list(config["argv"])
    # A slice whose devices are CPUs (the local simulation, CPU-only clusters) implies
    # MaxText's cpu hardware mode; a user's explicit hardware=... always wins.
    if os.environ.get("JAX_PLATFORMS", "").split(",")[0] == "cpu" and not any(
        a.startswith("hardware=") for a in argv
    ):
        argv.append("hardware=cpu")

    rank = ray.train.get_context().get_world_rank()
    if not os.environ.get("LAUNCHER_ORBAX_INFO"):
        # Orbax logs a dozen INFO lines per host per checkpoint and buries MaxText's own lines;
        # its warnings and errors still show. LAUNCHER_ORBAX_INFO=1 keeps everything.
        logging.getLogger("absl").addFilter(_drop_orbax_info)
    tracker = ProgressTracker(total_steps=int(config.get("steps", 0)), echo=rank == 0)
    absl_logger = logging.getLogger("absl")
    absl_logger.addHandler(tracker)
    try:
        # Imported here: jax must not be imported before the backend set up jax.distributed.
        from maxtext.trainers.pre_train import train as maxtext_train

        maxtext_train.main(argv)
    finally:
        absl_logger.removeHandler(tracker)
    if rank == 0:
        publish_summary(config["summary_key"], tracker.summary())


def _drop_orbax_info(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or "/orbax/" not in record.pathname


def publish_summary(key: str, summary: dict) -> None:
    """Hands rank 0's numbers to the driver (Ray Train keeps metrics only with checkpoints)."""
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(key, json.dumps(summary), overwrite=True, namespace=KV_NAMESPACE)


def read_summary(key: str) -> dict:
    from ray.experimental import internal_kv

    raw = internal_kv._internal_kv_get(key, namespace=KV_NAMESPACE)
    return json.loads(raw) if raw else {}
