"""A PyTorch job: its words, read once, and what it runs on.

    [--run_name=NAME] [--max_failures=N] [--max_preemptions=N] [--dry_run] SCRIPT.py [ARGS]

The job flags come before the script; every word after it is the script's, passed unchanged
(its own `--lr 3e-4` never reaches a parser of ours). It runs one Ray Train worker per TPU chip
(PyTorch's device-centric mode: each process holds one chip), on the slices of the cluster it is
submitted to, and its checkpoints go under `<output dir>/<run_name>/checkpoints/` as a MaxText
run's do (launcher.runtime.torch_job).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from launcher.core.errors import UsageError
from launcher.core.run_dir import RunDir
from launcher.core.slices import TpuSlices

FRAMEWORKS = ("jax", "torch")
DEFAULT_MAX_FAILURES = 3  # as the MaxText job's --max_failures


def _flags() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torch job", add_help=False, exit_on_error=False)
    p.add_argument("--run_name", "--run-name", dest="run_name")
    p.add_argument("--max_failures", "--max-failures", dest="max_failures", type=int)
    p.add_argument("--max_preemptions", "--max-preemptions", dest="max_preemptions", type=int)
    p.add_argument("--dry_run", "--dry-run", dest="dry_run", action="store_true")
    return p


@dataclass(frozen=True)
class TorchJobSpec:
    """A torch job as the user wrote it."""

    script: str
    script_args: tuple[str, ...]
    run_name: str
    max_failures: int = DEFAULT_MAX_FAILURES
    max_preemptions: int = -1  # as the MaxText job's: preemptions are not failures
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
                f"write it after {words[at]}; the job's: --run_name, --max_failures, "
                "--max_preemptions, --dry_run",
            )
        if not ns.run_name:
            raise UsageError(
                "--run_name",
                "is missing: the run's checkpoints live under it, and a second submission with "
                "the same name resumes them",
                f"--run_name={Path(words[at]).stem}-1 {words[at]}",
            )
        failures = DEFAULT_MAX_FAILURES if ns.max_failures is None else ns.max_failures
        preemptions = -1 if ns.max_preemptions is None else ns.max_preemptions
        for flag, value in (("--max_failures", failures), ("--max_preemptions", preemptions)):
            if value < -1:
                raise UsageError(flag, f"is {value}", "-1 (no limit), 0 or more")
        return cls(
            words[at], tuple(words[at + 1 :]), ns.run_name, failures, preemptions, ns.dry_run
        )

    def words(self) -> list[str]:
        """The job's words again, as the in-cluster command reads them."""
        flags = [
            f"--run_name={self.run_name}",
            f"--max_failures={self.max_failures}",
            f"--max_preemptions={self.max_preemptions}",
        ]
        return [*flags, *(["--dry_run"] if self.dry_run else []), self.script, *self.script_args]


@dataclass(frozen=True)
class TorchPlan:
    """What a torch job runs: the slices, one worker per chip; the run's directory."""

    spec: TorchJobSpec
    slices: TpuSlices
    output_dir: str

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
