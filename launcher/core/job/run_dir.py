"""A run's directory, named in one place: what `train` writes under `<output dir>/<run_name>/`
and what resume, `generate`, `export`, the bucket check and the summary read back.

    <output dir>/                  the bucket's mount in the cluster (LAUNCHER_OUTPUT_DIR)
      ray_results/                 Ray Train's own records of each job
      jax_cache/                   JAX's persistent compilation cache, shared by every run
      <run_name>/
        checkpoints/<step>/        Orbax's saves (committed: <step>/commit_success.txt)
        tpu-launcher-run.json      the MaxText config and arguments the run trained with
        hf/<step>/                 `export`: the checkpoint as a Hugging Face model
        tensorboard/launcher.png   the loss and throughput plot, beside MaxText's TensorBoard logs
        hangs/                     the hosts' stacks when the hang watchdog ended an attempt
        jobs/<id>/                 each job's history: Ray's log of it and its record (job.json)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The chart sets this to the gcsfuse mount path; the local cluster to its bucket directory.
OUTPUT_DIR_ENV = "LAUNCHER_OUTPUT_DIR"
DEFAULT_OUTPUT_DIR = "/data"
CHECKPOINTS_SUBDIR = "checkpoints"
COMPILE_CACHE_SUBDIR = "jax_cache"
RUN_RECORD = "tpu-launcher-run.json"
EXPORT_SUBDIR = "hf"
TENSORBOARD_SUBDIR = "tensorboard"
RAY_RESULTS_SUBDIR = "ray_results"


def output_dir() -> str:
    """Where runs go here: the bucket's mount in the cluster, the bucket directory locally."""
    return os.environ.get(OUTPUT_DIR_ENV, DEFAULT_OUTPUT_DIR)


def compile_cache_for(output_dir: str) -> str:
    """JAX's persistent compilation cache, one for every run in the output directory: JAX keys
    each program by what decides its compiled code (jax/_src/cache_key.py: the program, jaxlib's
    version, the backend and its version, so libtpu's, XLA_FLAGS and LIBTPU_INIT_ARGS, the
    compile options and the devices' topology), so a run loads only what compiles the same on
    the same chips, and a new run of the same shapes compiles nothing again."""
    # Joined as text: a gs:// directory is no local Path.
    return f"{output_dir.rstrip('/')}/{COMPILE_CACHE_SUBDIR}"


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS_SUBDIR

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / str(step)

    @property
    def record(self) -> Path:
        return self.path / RUN_RECORD

    def export(self, step: int) -> Path:
        return self.path / EXPORT_SUBDIR / str(step)

    @property
    def tensorboard(self) -> Path:
        return self.path / TENSORBOARD_SUBDIR

    @property
    def plot(self) -> Path:
        return self.tensorboard / "launcher.png"
