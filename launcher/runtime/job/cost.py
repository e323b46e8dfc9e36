"""What a finished (or failed) job's chips cost, for its summary: the slices it asked for, held
for its wall time, at the price the job, its release or the launcher's dated table gives for
their generation and the capacity GKE provided (launcher.core.tpu.prices)."""

from __future__ import annotations

from launcher.core.errors import UsageError
from launcher.core.job.outcome import Outcome
from launcher.core.job.training_plan import TrainingPlan
from launcher.core.release_facts import ReleaseFacts
from launcher.core.tpu.prices import JobCost, Price, job_cost, no_price_reason, price_of
from launcher.core.tpu.slices import TpuSlices


def run_cost(
    plan: TrainingPlan,
    outcome: Outcome,
    price_per_chip_hour: float,
    release: ReleaseFacts | None = None,
) -> tuple[JobCost | None, str]:
    """The job's cost (None: no price or no TPU chips) and why, in words, when none."""
    slices = plan.slices
    if not isinstance(slices, TpuSlices):  # a CPU slice (or, before submission, none known)
        return None, "no TPU chips (a CPU slice)"
    shape = slices.shape
    generation = shape.generation.name
    capacity = outcome.capacity
    try:
        if price_per_chip_hour > 0:
            price: Price | None = Price(price_per_chip_hour, "the job's --price_per_chip_hour")
        else:  # the release's overrides and region, as the chart gives them to its head
            facts = release or ReleaseFacts.from_env()
            price = price_of(generation, capacity, facts.region, facts.prices)
    except UsageError as e:  # the release's prices unreadable: said, never failing the job
        return None, str(e)
    if price is None:
        return None, no_price_reason(generation, capacity)
    goodput, steps, tokens = outcome.goodput, outcome.trained.steps, outcome.trained.tokens
    if not tokens:  # none reported (MaxText's count, where it gives none): the batch's size
        tokens = steps * plan.tokens_per_step(slices.num_devices)
    chips = shape.chips * slices.num_slices
    return job_cost(price, chips, goodput.wall_seconds, goodput.goodput, steps, tokens), ""
