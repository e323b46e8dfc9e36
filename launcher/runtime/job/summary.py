"""The summary a training job prints when it ends (the driver's last lines, and the
machine-readable record `tpu-launcher` reads back from them): the run, its steps, losses and
evals, checkpoints, the goodput breakdown, the slices it ran on and each restart's cause."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from launcher.core.job.checkpoints import committed_steps
from launcher.core.job.events import format_result, format_summary_title
from launcher.core.job.frameworks import JAX
from launcher.core.job.goodput import (
    format_breakdown,
    format_compile_cache,
    format_saves,
    format_timeline,
)
from launcher.core.job.outcome import Outcome
from launcher.core.job.training_plan import TrainingPlan
from launcher.core.tpu.preemption import format_restarts
from launcher.core.tpu.prices import format_cost


def reports_steps(plan: TrainingPlan, metrics: dict[str, Any]) -> bool:
    """Whether the job's steps are known to the launcher: MaxText's always, a script's where it
    reports them through TorchJob (its length, or a step)."""
    return bool(plan.steps_asked(metrics) or "last_step" in metrics)


def print_summary(
    plan: TrainingPlan, metrics: dict[str, Any], seconds: float, outcome: Outcome
) -> dict[str, Any]:
    """Prints the summary and its machine-readable record; returns the record. A MaxText
    job's adds its compile cache, TensorBoard files and MaxText's way to go on."""
    maxtext = plan.framework is JAX
    run_dir = plan.run_dir
    steps = committed_steps(run_dir.path)
    first = metrics.get("first_step")
    total = plan.steps_asked(metrics)
    reported = reports_steps(plan, metrics)
    # A script that reports no steps may keep checkpoints of its own, which the launcher cannot
    # see: it says neither that the run started at 0 nor that it resumed.
    resumed = (
        f"resumed at step {first}"
        if first
        else "started from step 0"
        if reported
        else "its steps are not reported to the launcher"
    )
    print("\n" + format_summary_title("training"), flush=True)
    print(
        f"run:          {plan.run_name} ({resumed}; {metrics.get('steps_this_run', 0)} steps "
        f"run in {seconds:.0f}s)"
    )
    if reported:
        print(f"steps done:   {metrics.get('last_step', -1) + 1} of {total}")
    else:  # a PyTorch script that reports no steps (run as torchrun runs it)
        print(
            "steps done:   not reported (the script calls no TorchJob.step_done: its wall "
            "time and restarts are below, its output above)"
        )
    if "final_loss" in metrics:
        print(f"loss:         {metrics['first_loss']:.4f} -> {metrics['final_loss']:.4f}")
    if evals := outcome.evals:
        (first, first_loss), (last, last_loss) = evals[0], evals[-1]
        print(
            f"eval loss:    {first_loss:.4f} -> {last_loss:.4f} (perplexity "
            f"{math.exp(first_loss):.2f} -> {math.exp(last_loss):.2f}; after steps {first} and "
            f"{last}, {len(evals)} evals)"
        )
    print(f"checkpoints:  {run_dir.checkpoints} (steps {', '.join(map(str, steps)) or '-'})")
    restored_from = [start.restored_from for start in outcome.starts]
    if saves_line := format_saves(outcome.saves, restored_from):
        print(saves_line)
    if outcome.sparkline:
        print(f"loss curve:   {outcome.sparkline}")
    for line in format_breakdown(outcome.goodput):  # by wall time where steps are not known
        print(line)
    if maxtext:
        print(format_compile_cache(outcome.compile_cache))
    for line in format_timeline([start.timeline for start in outcome.starts]):
        print(line)
    cost = outcome.cost
    print(format_cost(cost) if cost else f"cost:         not known: {outcome.no_cost}")
    if len({start.slices for start in outcome.starts}) > 1:
        print(
            "slices:       "
            + " -> ".join(
                f"{start.slices} (steps {start.first_step}-{start.last_step})"
                if start.first_step is not None
                else f"{start.slices} (no step)"
                for start in outcome.starts
            )
        )
    for line in format_restarts(outcome.restarts):
        print(line)
    if outcome.plot:
        print(f"plot:         {outcome.plot}")
    if maxtext:
        # The event files' directory, not a command: TensorBoard is not installed with us.
        print(f"tensorboard:  {run_dir.tensorboard} (MaxText's event files)")
        print(
            f"resume:       submit again with run_name={plan.run_name} and a larger steps= (or "
            "--steps_beyond_checkpoint=N; `tpu-launcher demo` does) to go on from the latest "
            "checkpoint"
        )
    elif reported:
        print(
            f"resume:       submit again with --run_name={plan.run_name}: the script's "
            "restore() goes on from the latest checkpoint"
        )
    else:
        print(
            "resume:       not known to the launcher: the script saves through no TorchJob "
            "call, so whether a resubmission goes on from a checkpoint of its own (its "
            "torch.distributed.checkpoint saves) is the script's to say, in its output above "
            "(TorchJob.save and restore let the launcher report it)"
        )
    record = {
        "run_dir": str(run_dir.path),
        "checkpoints": steps,
        **metrics,
        "goodput": outcome.goodput.to_json(),
        "compile_cache": outcome.compile_cache,
        "cost": cost.to_json() if cost else None,
        "starts": [asdict(start) for start in outcome.starts],
        "saves": outcome.saves,
        "restarts": [asdict(r) for r in outcome.restarts],
        "evals": outcome.evals,
        "plot": outcome.plot,
    }
    print(format_result(record), flush=True)
    return record
