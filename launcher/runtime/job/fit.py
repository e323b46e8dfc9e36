"""The driver's run of a Ray trainer, whatever the framework: `fit` under the hang budget, the
job's figures as Ray metrics while it runs, and, when training fails, the goodput, the restarts
and the budgets said in the log; the job's history file ends either way."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from launcher.core.job.goodput import by_wall_time, format_breakdown
from launcher.core.job.outcome import Outcome
from launcher.core.job.training_plan import TrainingPlan
from launcher.core.tpu.prices import JobCost, format_cost
from launcher.runtime.job.outcome import JobOutcome


def _budget(limit: int) -> str:
    return "any number" if limit < 0 else str(limit)


@dataclass(frozen=True)
class RestartBudgets:
    """--max_failures, --max_preemptions and --max_hangs (-1: no limit)."""

    failures: int
    preemptions: int
    hangs: int

    def describe(self) -> str:
        return (
            f"{self.failures} restarts allowed after failures (--max_failures), "
            f"{_budget(self.preemptions)} after preemptions (--max_preemptions), "
            f"{_budget(self.hangs)} after hangs (--max_hangs)"
        )


def fit_job(
    trainer: Any,
    outcomes: JobOutcome,
    budgets: RestartBudgets,
    labels: dict[str, str] | None,
    history: Any,
    priced: Callable[[Outcome], tuple[JobCost | None, str]] | None = None,
) -> Outcome | None:
    """`trainer.fit()`; the run's outcome, or None once a failure is said (and the history
    ended FAILED). `labels`: the job's Ray metrics labels (None: --nometrics); `priced`: the
    cost of an outcome, said on a failure too (the chips were paid for)."""
    from launcher.runtime.job.device_watch import DeviceWatch
    from launcher.runtime.job.hang_policy import with_hang_budget
    from launcher.runtime.job.metrics import JobMetrics, JobReporter

    reporter = (
        JobReporter(JobMetrics(labels), lambda: outcomes.read(plot=False), outcomes.run_dir.path)
        if labels is not None
        else None
    )
    if reporter is not None:
        reporter.start()
    watch = DeviceWatch(lambda: last_step(outcomes.summary_key)).start()
    try:
        with with_hang_budget(budgets.hangs, outcomes.summary_key):
            trainer.fit()  # Ray Train keeps metrics only with Ray checkpoints; ours are the run's
    except Exception as e:  # Ray wraps worker failures; show the cause, not Ray's internals
        watch.stop()
        outcome = outcomes.read()
        if reporter is not None:
            reporter.stop(outcome)
        for line in format_breakdown(outcome.goodput):
            print(line, flush=True)
        for restart in outcome.restarts:
            print(f"  {restart.describe()}", flush=True)
        if priced is not None and (cost := priced(outcome)[0]) is not None:
            print(format_cost(cost), flush=True)
        print(
            f"\nlauncher: training failed ({budgets.describe()}): {type(e).__name__}: {e}\n"
            f"  checkpoints so far are kept under {outcomes.run_dir.checkpoints}; fix the cause "
            "and submit again with the same run name to resume.",
            file=sys.stderr,
            flush=True,
        )
        if history is not None:
            history.finish("FAILED", None)
        return None
    watch.stop()
    outcome = outcomes.read()
    if reporter is not None:  # the job's last figures are the summary's
        reporter.stop(outcome)
    return outcome


def last_step(summary_key: str) -> int | None:
    """The latest step the job's current start finished (None: none yet)."""
    from launcher.runtime.job.kv import read_attempts

    attempts = sorted(read_attempts(summary_key), key=lambda a: a.started_at)
    if not attempts:
        return None
    latest = attempts[-1]
    return (
        latest.last_step
        if latest.last_step is not None
        else (latest.steps[-1].step if latest.steps else None)
    )


def run_job(
    trainer: Any,
    outcomes: JobOutcome,
    budgets: RestartBudgets,
    labels: dict[str, str] | None,
    plan: TrainingPlan,
    total_steps: int | None,
    price_per_chip_hour: float = 0.0,
) -> int:
    """The driver's whole run of `trainer` (`fit_job`), its summary and its history's end:
    the job's exit code."""
    from launcher.runtime.job.cost import run_cost
    from launcher.runtime.job.kv import read_summary
    from launcher.runtime.job.summary import print_summary, reports_steps

    history = outcomes.history(plan.run_name, total_steps)
    start = time.monotonic()

    def priced(outcome: Outcome) -> tuple[JobCost | None, str]:
        return run_cost(plan, outcome, price_per_chip_hour)

    if (outcome := fit_job(trainer, outcomes, budgets, labels, history, priced)) is None:
        return 1
    summary = read_summary(outcomes.summary_key)
    if not reports_steps(plan, summary):  # no step clock: the script's own time, for all
        ran = summary.get("script_seconds", 0.0)
        outcome = replace(outcome, goodput=by_wall_time(outcome.goodput, ran))
    cost, no_cost = priced(outcome)
    outcome = replace(outcome, cost=cost, no_cost=no_cost)
    record = print_summary(plan, summary, time.monotonic() - start, outcome)
    if history is not None:
        history.finish("SUCCEEDED", record)
    return 0
