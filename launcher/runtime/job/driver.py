"""The driver's part of a training job, whatever the framework: joining Ray, the key the
workers' bookkeeping goes under, the run's Ray Train configuration with its restart budgets,
and the run itself with its outcome, summary and history. A framework's entrypoint supplies only
its plan, its trainer and its loop (launcher.runtime.train.entrypoint for MaxText,
launcher.runtime.torch.entrypoint for PyTorch)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from launcher.core.job.run_dir import RAY_RESULTS_SUBDIR, RunDir
from launcher.core.job.training_plan import TrainingPlan
from launcher.runtime.job.outcome import JobOutcome


class Policy(Protocol):
    """The job's policy flags (launcher.core.job.flags.POLICY_FLAGS), as both frameworks' jobs
    read them."""

    @property
    def max_failures(self) -> int: ...
    @property
    def max_preemptions(self) -> int: ...
    @property
    def max_hangs(self) -> int: ...
    @property
    def metrics(self) -> bool: ...
    @property
    def price_per_chip_hour(self) -> float: ...


@dataclass(frozen=True)
class ReportFailures:
    """The policy of a job with nothing to resume (generate): a failure is reported, not
    retried; a preempted host's work starts over on its replacement."""

    max_failures: int = 0
    max_preemptions: int = -1
    max_hangs: int = 0
    metrics: bool = False
    price_per_chip_hour: float = 0.0


def join_ray() -> list[dict[str, Any]]:
    """Joins the Ray cluster this driver runs on; its nodes."""
    # Before Ray is imported, which reads it: Ray would fold lines that differ only in numbers
    # (the progress lines, each worker's own).
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    import ray

    ray.init(log_to_driver=True)
    nodes: list[dict[str, Any]] = ray.nodes()
    return nodes


def summary_key(run_name: str) -> str:
    """Where this job's workers put their starts' events in Ray's KV store: one per job, so a
    resubmission's are its own."""
    return f"summary/{run_name}/{uuid.uuid4().hex}"


def run_config(
    run_name: str, output_dir: str, policy: Policy, env: dict[str, str] | None = None
) -> Any:
    """Ray Train's RunConfig of the job: its results beside the runs, its failure and preemption
    budgets, and what every worker process gets on top of its container's environment."""
    from ray.train.v2.api.config import FailureConfig, RunConfig  # the trainers' (Train v2)

    return RunConfig(
        name=run_name,
        storage_path=f"{output_dir.rstrip('/')}/{RAY_RESULTS_SUBDIR}",
        failure_config=FailureConfig(
            max_failures=policy.max_failures, max_preemption_failures=policy.max_preemptions
        ),
        worker_runtime_env={"env_vars": env} if env else None,
    )


def metric_labels(policy: Policy, run_name: str, slice_name: str) -> dict[str, str] | None:
    """The job's Ray metrics' labels; None with --nometrics."""
    from launcher.runtime.job.metrics import job_labels

    return job_labels(run_name, slice_name) if policy.metrics else None


def drive(
    trainer: Any,
    plan: TrainingPlan,
    key: str,
    run_dir: RunDir,
    started_at: float,
    policy: Policy,
    labels: dict[str, str] | None,
    total_steps: int | None,
    compile_cache_dir: str = "off",
) -> int:
    """Runs `trainer` to its end within the job's restart budgets, then its summary and
    history's last word: the job's exit code."""
    from launcher.runtime.job.fit import RestartBudgets, run_job

    outcomes = JobOutcome(key, run_dir, started_at, compile_cache_dir).begin()
    budgets = RestartBudgets(policy.max_failures, policy.max_preemptions, policy.max_hangs)
    return run_job(
        trainer, outcomes, budgets, labels, plan, total_steps, policy.price_per_chip_hour
    )
