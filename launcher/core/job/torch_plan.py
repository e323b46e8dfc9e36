"""A PyTorch job: its words, read once, and what it runs on.

    --run_name=NAME [the job's policy flags: --max_failures=N ...] SCRIPT.py [ARGS]

The job flags (its run's name, then launcher.core.job.flags.POLICY_FLAGS, a MaxText job's too)
come before the script; every word after it is the script's, passed unchanged
(its own `--lr 3e-4` never reaches a parser of ours). It runs one Ray Train worker per TPU chip
(PyTorch's device-centric mode: each process holds one chip), on the slices of the cluster it is
submitted to, and its checkpoints go under `<output dir>/<run_name>/checkpoints/` as a MaxText
run's do (launcher.runtime.torch.job).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.core.errors import UsageError
from launcher.core.job.flags import (
    DEFAULT_HANG_STEP_FACTOR,
    DEFAULT_HANG_TIMEOUT_S,
    DEFAULT_MAX_FAILURES,
    DEFAULT_MAX_HANGS,
    POLICY,
    POLICY_FLAGS,
)
from launcher.core.job.frameworks import TORCH, Framework
from launcher.core.job.run_dir import RunDir
from launcher.core.tpu.slices import TpuSlices

# The job's line on the local cluster (gloo, the CPU): the one way it differs from a TPU run.
SIMULATED_NOTE = (
    "launcher: the chips are simulated: the process group is gloo and each worker's device the "
    "CPU; on TPU they are tpu_dist and the worker's chip, and nothing else differs"
)

# The job's flags: its run, then the policy every framework's job takes (core.job_flags).
JOB_FLAGS = ", ".join(
    ["--run_name", *(f"--no{f.name}" if f.default is True else f"--{f.name}" for f in POLICY_FLAGS)]
)


def _flags() -> argparse.ArgumentParser:
    """The job's flags, each spelled with underscores (as MaxText's jobs) or dashes."""
    p = argparse.ArgumentParser(prog="torch job", add_help=False, exit_on_error=False)
    p.add_argument("--run_name", "--run-name", dest="run_name")
    for flag in POLICY_FLAGS:
        dashed = flag.name.replace("_", "-")
        if flag.kind is bool and flag.default:  # on by default: --nometrics turns it off
            p.add_argument(
                f"--no{flag.name}", f"--no-{dashed}", dest=flag.name, action="store_false"
            )
        elif flag.kind is bool:
            p.add_argument(f"--{flag.name}", f"--{dashed}", dest=flag.name, action="store_true")
        else:
            p.add_argument(f"--{flag.name}", f"--{dashed}", dest=flag.name, type=flag.kind)
    return p


@dataclass(frozen=True)
class TorchJobSpec:
    """A torch job as the user wrote it."""

    script: str
    script_args: tuple[str, ...]
    run_name: str
    max_failures: int = DEFAULT_MAX_FAILURES
    max_preemptions: int = -1  # as the MaxText job's: preemptions are not failures
    max_hangs: int = DEFAULT_MAX_HANGS
    hang_timeout_s: float = DEFAULT_HANG_TIMEOUT_S  # the hang watchdog's floor (0: off)
    hang_step_factor: float = DEFAULT_HANG_STEP_FACTOR
    metrics: bool = True
    price_per_chip_hour: float = 0.0  # 0: the release's or the table's price
    dry_run: bool = False

    @classmethod
    def parse(cls, words: list[str]) -> TorchJobSpec:
        at = next((i for i, w in enumerate(words) if not w.startswith("-")), None)
        if at is None or not words[at].endswith(".py"):
            raise UsageError(
                "torch job",
                f"names no Python script ({' '.join(words) or 'nothing'} given)",
                "put the script after the job's flags: --run_name=my-run train.py [its arguments]",
            )
        try:
            ns, unknown = _flags().parse_known_args(words[:at])
        except argparse.ArgumentError as e:
            raise UsageError("torch job flags", str(e), "--run_name=NAME --max_failures=N") from e
        if unknown:
            raise UsageError(
                " ".join(unknown),
                "is no flag of a torch job (the script's own flags go after the script)",
                f"write it after {words[at]}; the job's: {JOB_FLAGS}",
            )
        if not ns.run_name:
            raise UsageError(
                "--run_name",
                "is missing: the run's checkpoints live under it, and a second submission with "
                "the same name resumes them",
                f"--run_name={Path(words[at]).stem}-1 {words[at]}",
            )
        given = {k: v for k, v in vars(ns).items() if v is not None and k != "run_name"}
        for name, value in given.items():
            POLICY[name].check(value)
        return cls(words[at], tuple(words[at + 1 :]), ns.run_name, **given)

    def words(self) -> list[str]:
        """The job's words again, as the in-cluster command reads them."""
        words = [f"--run_name={self.run_name}"]
        for flag in POLICY_FLAGS:
            value = getattr(self, flag.name)
            if flag.kind is not bool:
                words.append(f"--{flag.name}={value:g}")
            elif value != flag.default:
                words.append(f"--no{flag.name}" if flag.default else f"--{flag.name}")
        return [*words, self.script, *self.script_args]


@dataclass(frozen=True)
class TorchPlan:
    """What a torch job runs: the slices, one worker per chip; the run's directory."""

    spec: TorchJobSpec
    slices: TpuSlices
    output_dir: str

    @property
    def framework(self) -> Framework:
        return TORCH

    def steps_asked(self, metrics: Mapping[str, Any]) -> int | None:
        """A script's length as it reported it (TorchJob), if it did."""
        total = metrics.get("total_steps")
        return int(total) if total is not None else None

    def tokens_per_step(self, num_devices: int) -> int:
        return 0  # a script's batch is its own

    @property
    def run_name(self) -> str:
        return self.spec.run_name

    @property
    def run_dir(self) -> RunDir:
        return RunDir(Path(self.output_dir) / self.run_name)

    @property
    def workers_per_slice(self) -> int:
        return self.slices.shape.chips

    @property
    def num_workers(self) -> int:
        return self.workers_per_slice * self.slices.num_slices

    @property
    def resources_per_worker(self) -> dict[str, float]:
        """A chip, and a chip's share of the one CPU a MaxText job's worker asks per host (Ray's
        default of one CPU each would ask a simulated host for a CPU per chip)."""
        return {"TPU": 1, "CPU": 1 / self.slices.shape.chips_per_host}

    def describe(self) -> str:
        return (
            f"{self.slices.describe()}: {self.num_workers} PyTorch workers, one per chip "
            f"({self.slices.shape.chips_per_host} per host)"
        )
