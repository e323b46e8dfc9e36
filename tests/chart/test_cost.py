"""`cost`: the release's NOTES say what its slices cost an hour standing, at the price a job's
summary would use (launcher.core.tpu.prices.price_of, the one rule, which the chart's
tpu-stack.standingCost mirrors), and the head gets the release's prices for the jobs.

NOTES are rendered as `helm install` prints them (tests/chart/conftest.py: notes)."""

from __future__ import annotations

import json
import re

import pytest

from harness.helm import BUCKET, VALUES, by_kind, refused, render
from launcher.core.release_facts import ReleaseFacts
from launcher.core.tpu.prices import Price, parse_overrides, price_of
from tests.chart.conftest import notes

pytestmark = pytest.mark.chart

COST = re.compile(r"Cost: (\d+) chips x \$([\d.]+) per chip-hour = \$([\d.]+) an hour .*\((.*)\);")


@pytest.mark.parametrize(
    ("values", "sets", "generation", "capacity", "region", "chips"),
    [
        ("v6e-16", (), "v6e", "on-demand", "", 16),
        ("v6e-16-x2", (), "v6e", "on-demand", "", 32),
        ("v5p-16", (), "v5p", "on-demand", "", 8),
        # A reservation is billed as on-demand; the release's own price wins, its region's first.
        ("v6e-16", ("--set", "ray.worker.tpu.capacity=reservation",
                    "--set", "ray.worker.tpu.reservation=res-a"), "v6e", "reservation", "", 16),
        ("v6e-16", ("--set-json", 'cost.pricesPerChipHour={"v6e": {"spot": 1.1}}',
                    "--set", "ray.worker.tpu.capacity=spot"), "v6e", "spot", "", 16),
        ("v6e-16", ("--set", "cost.region=us-east5", "--set-json",
                    'cost.pricesPerChipHour={"v6e": {"us-east5/on-demand": 2.5, "on-demand": 9}}'),
         "v6e", "on-demand", "us-east5", 16),
    ],
)  # fmt: skip
def test_the_notes_price_the_standing_slices_as_a_jobs_summary_would(
    chart_with_notes, values, sets, generation, capacity, region, chips
):
    text = notes(chart_with_notes, values, *sets)
    found = COST.search(text)
    assert found, text
    overrides = {}
    if "--set-json" in sets:
        overrides = parse_overrides(
            json.dumps(json.loads(sets[sets.index("--set-json") + 1].split("=", 1)[1]))
        )
    price = price_of(generation, capacity, region, overrides)
    assert price is not None
    assert int(found[1]) == chips
    assert float(found[2]) == pytest.approx(price.usd_per_chip_hour)
    assert float(found[3]) == pytest.approx(chips * price.usd_per_chip_hour, abs=0.005)
    assert found[4] == price.source


def test_a_slice_with_no_price_says_how_to_give_it_one(chart_with_notes):
    assert price_of("tpu7x", "on-demand") is None  # no list price published: the NOTES say so
    text = notes(chart_with_notes, "tpu7x-16")
    assert "Cost: not known: no price for tpu7x on-demand" in text
    assert "set cost.pricesPerChipHour.tpu7x.on-demand" in text


def test_the_head_gets_the_release_prices_and_region_for_its_jobs():
    prices = {"v6e": {"spot": 1.1, "us-east5/on-demand": 2.5}}
    docs = render(
        VALUES / "v6e-16.yaml", "--set", "cost.region=us-east5",
        "--set-json", f"cost.pricesPerChipHour={json.dumps(prices)}",
    )  # fmt: skip
    (cluster,) = by_kind(docs, "RayCluster")
    facts = ReleaseFacts.of_cluster_spec(cluster["spec"], "the render")
    assert facts is not None and (facts.prices, facts.region) == (prices, "us-east5")
    plain = by_kind(render(VALUES / "v6e-16.yaml"), "RayCluster")[0]
    facts = ReleaseFacts.of_cluster_spec(plain["spec"], "the render")
    assert facts is not None and (facts.prices, facts.region) == ({}, "")


@pytest.mark.parametrize(
    "prices",
    ['{"v6f": {"spot": 1}}', '{"v6e": {"spot": -1}}', '{"v6e": {"cheap": 1}}',
     '{"v6e": {"US-East5/spot": 1}}', '{"v6e": {"spot": "1.1x"}}'],
)  # fmt: skip
def test_prices_the_launcher_could_not_use_are_refused(prices):
    err = refused(
        *BUCKET, "--set-json", f"cost.pricesPerChipHour={prices}", values=VALUES / "v6e-16.yaml"
    )
    # The refusal points at the key at fault (not at a random one, as a propertyNames
    # refusal does in Helm's JSON-schema library: santhosh-tekuri/jsonschema#258).
    assert "at '/cost/pricesPerChipHour" in err, err
    key = next(iter(json.loads(prices)["v6e" if "v6e" in prices else "v6f"]))
    assert ("v6f" in err) if "v6f" in prices else (key in err), err


def test_a_price_given_by_set_is_read_as_the_number_helm_users_write():
    # Helm's --set passes 1.10 as the string "1.10" (strvals types only integers).
    sets = ("--set", "cost.pricesPerChipHour.v6e.spot=1.10")
    sets += ("--set", "ray.worker.tpu.capacity=spot")
    (cluster,) = by_kind(render(VALUES / "v6e-16.yaml", *sets), "RayCluster")
    facts = ReleaseFacts.of_cluster_spec(cluster["spec"], "the render")
    assert facts is not None and facts.prices == {"v6e": {"spot": 1.1}}
    assert price_of("v6e", "spot", "", facts.prices) == Price(
        1.1, "the release's cost.pricesPerChipHour for v6e spot"
    )
