"""What a job's chips cost: the price (the job's flag, the release's values by region, the dated
list price; a reservation billed as on-demand; none for Spot without a stated price) and the
run's cost from its chips, wall time, goodput, useful steps and tokens."""

from __future__ import annotations

import pytest

from launcher.core.errors import UsageError
from launcher.core.job.goodput import Goodput
from launcher.core.job.outcome import Outcome, Start, Trained
from launcher.core.job.plan import JobOptions, parse_job_args, plan_job
from launcher.core.release_facts import RELEASE_ENV, ReleaseFacts
from launcher.core.tpu.prices import (
    LIST_PRICES,
    PRICES_AS_OF,
    Price,
    format_cost,
    job_cost,
    parse_overrides,
    price_of,
)
from launcher.runtime.job.cost import run_cost

pytestmark = pytest.mark.unit

V6E_16 = JobOptions(accelerator_type="v6e", topology="4x4")


def test_the_list_price_prices_on_demand_and_reservations_and_says_where_it_came_from():
    on_demand = price_of("v6e", "on-demand")
    assert on_demand is not None and on_demand.usd_per_chip_hour == LIST_PRICES["v6e"]["on-demand"]
    assert PRICES_AS_OF in on_demand.source and "cloud.google.com/tpu/pricing" in on_demand.source
    reserved = price_of("v6e", "reservation")
    assert reserved is not None and reserved.usd_per_chip_hour == on_demand.usd_per_chip_hour
    assert "billed as on-demand" in reserved.source
    unknown = price_of("v6e", None)  # the local cluster: nothing says how the node came
    assert unknown is not None and "capacity not known" in unknown.source
    assert price_of("v6e", "spot") is None and price_of("tpu7x", "on-demand") is None


def test_the_release_prices_win_its_region_first():
    given = {"v6e": {"spot": 1.1, "us-east5/spot": 0.9, "on-demand": 2.0}}
    assert price_of("v6e", "spot", "us-east5", given) == Price(
        0.9, "the release's cost.pricesPerChipHour for v6e us-east5/spot"
    )
    assert price_of("v6e", "spot", "europe-west4", given).usd_per_chip_hour == 1.1  # type: ignore[union-attr]
    assert price_of("v6e", "on-demand", "", given).usd_per_chip_hour == 2.0  # type: ignore[union-attr]
    assert price_of("v5p", "on-demand", "", given).usd_per_chip_hour == 4.20  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "raw", ["{", "[1]", '{"v6e": 2}', '{"v6e": {"spot": -1}}', '{"v6e": {"spot": true}}']
)
def test_prices_of_the_wrong_shape_are_refused_with_their_source(raw):
    with pytest.raises(UsageError, match=r"cost\.pricesPerChipHour"):
        parse_overrides(raw)


def test_a_runs_cost_counts_its_chip_hours_its_waste_its_steps_and_tokens():
    cost = job_cost(Price(2.5, "stated"), 16, 1800, 0.8, 200, 400_000_000)
    assert cost.chip_hours == 8 and cost.usd == 20
    assert cost.usd_not_productive == pytest.approx(4)
    assert cost.usd_per_useful_step == pytest.approx(0.1)
    assert cost.usd_per_million_tokens == pytest.approx(0.05)
    assert format_cost(cost) == (
        "cost:         $20.00 for 8.000 chip-hours (16 chips at $2.50); $0.1000 per useful "
        "step; $0.0500 per million tokens; $4.00 of it not productive steps"
    )
    idle = job_cost(Price(2.5, "stated"), 16, 1800, 0.0, 0, 0)
    assert idle.usd_per_useful_step is None and idle.usd_per_million_tokens is None
    assert "per useful step" not in format_cost(idle)


def _plan(options: JobOptions = V6E_16):
    return plan_job(options, ["tiny-llama.yml", "run_name=r", "steps=10"])


def _start(capacity: str | None = None) -> Start:
    return Start(
        slices=1, workers=4, first_step=None, last_step=None, seconds_to_first_step=None,
        batch_tokens=[], megascale={}, capacity=capacity, restored_from=None, timeline=None,
    )  # fmt: skip


def _outcome(capacity: str | None, tokens: int = 0) -> Outcome:
    return Outcome(
        goodput=Goodput(3600.0, {}, 0.5, 0.0),
        compile_cache={},
        saves={},
        starts=[_start(), _start(capacity)],
        restarts=[],
        trained=Trained(steps=10, tokens=tokens),
        evals=[],
    )


def test_the_driver_prices_the_capacity_the_latest_start_ran_on():
    cost, why = run_cost(_plan(), _outcome("spot"), 0.0, release=ReleaseFacts())
    assert cost is None and "no price for v6e spot" in why and "--price_per_chip_hour" in why
    release = ReleaseFacts(prices={"v6e": {"us-east5/spot": 1.0}}, region="us-east5")
    cost, _ = run_cost(_plan(), _outcome("spot", tokens=1_000_000), 0.0, release=release)
    assert cost is not None and cost.usd == 16.0 and cost.chips == 16
    assert cost.usd_not_productive == 8.0 and cost.usd_per_million_tokens == 16.0
    # The job's own price wins over the release's.
    cost, _ = run_cost(_plan(), _outcome("spot"), 3.0, release=release)
    assert cost is not None and cost.usd == 48.0
    assert cost.price_source == "the job's --price_per_chip_hour"


def test_unreadable_release_facts_leave_the_cost_unknown_and_say_why(monkeypatch):
    monkeypatch.setenv(RELEASE_ENV, "{not json")  # as the head would read it
    cost, why = run_cost(_plan(), _outcome("spot"), 0.0)
    assert cost is None and RELEASE_ENV in why and "cannot be read" in why
    bad = '{"version": 1, "prices": {"v6e": {"spot": -1}}}'
    monkeypatch.setenv(RELEASE_ENV, bad)
    cost, why = run_cost(_plan(), _outcome("spot"), 0.0)
    assert cost is None and "prices" in why


def test_without_maxtexts_token_count_the_batch_size_counts_them():
    plan = _plan()
    cost, _ = run_cost(plan, _outcome("on-demand"), 1.0, release=ReleaseFacts())
    assert cost is not None
    tokens = 10 * plan.args.tokens_per_step(plan.slices.num_devices)
    assert cost.usd_per_million_tokens == pytest.approx(16.0 / (tokens / 1e6), rel=1e-4)


def test_a_cpu_slice_has_no_tpu_cost():
    cpu = plan_job(
        JobOptions(cpu_hosts=2, cpu_devices_per_host=2), ["tiny-llama.yml", "run_name=r"]
    )
    no_tpu = (None, "no TPU chips (a CPU slice)")
    assert run_cost(cpu, _outcome(None), 5.0, release=ReleaseFacts()) == no_tpu


def test_the_price_flag_is_a_job_flag_with_its_bound():
    job = parse_job_args(["--price_per_chip_hour=1.5", "tiny-llama.yml", "run_name=r"])
    assert job.options.price_per_chip_hour == 1.5
    with pytest.raises(UsageError, match="price_per_chip_hour"):
        parse_job_args(["--price_per_chip_hour=-1", "tiny-llama.yml", "run_name=r"])
