"""What a TPU chip-hour costs, and what a job's chip-hours came to: a dated table of list prices
by generation and capacity, which a release's values (`cost.pricesPerChipHour`, by region too)
and a job's `--price_per_chip_hour` override, and the cost of a run from its chips, its wall
time, its goodput, its useful steps and its tokens.

The list prices are Cloud TPU's public on-demand prices per chip-hour (PRICES_SOURCE, in the
base region the page quotes: us-central1, for v4 us-central2), written into this table on
PRICES_AS_OF from the page's published figures (not fetched: nothing here reaches the network;
a release whose bill differs states its own). Cloud TPU
bills a slice's chips for as long as its nodes are up, whatever runs on them. A reservation
without a commitment is billed at on-demand rates; Spot and flex-start prices change often and
differ by region, so the table has none: a job on them has no cost until its release states its
price (`cost.pricesPerChipHour: {v6e: {spot: 1.10}}`), as does a contract's (a commitment's)
price. The chart renders the same table (files/tpu-table.json's `prices`) for its NOTES.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from launcher.core.errors import UsageError
from launcher.core.tpu.capacity import ON_DEMAND, RESERVATION

PRICES_AS_OF = "2026-11-29"  # the day the figures below were written in
PRICES_SOURCE = "https://cloud.google.com/tpu/pricing"
# Generation -> capacity -> USD per chip-hour. Only what the page publishes as a list price.
LIST_PRICES: dict[str, dict[str, float]] = {
    "v4": {ON_DEMAND: 3.22},
    "v5e": {ON_DEMAND: 1.20},
    "v5p": {ON_DEMAND: 4.20},
    "v6e": {ON_DEMAND: 2.70},
}
# Billed as on-demand unless a commitment says otherwise (then its price goes in the values).
BILLED_AS = {RESERVATION: ON_DEMAND}


@dataclass(frozen=True)
class Price:
    usd_per_chip_hour: float
    source: str  # where the figure came from, in words

    def describe(self) -> str:
        return f"${self.usd_per_chip_hour:.2f} per chip-hour ({self.source})"


# A price written as a string: Helm's --set passes `1.10` as the string "1.10" (its strvals
# types only integers), so a release's values may hold either form; values.schema.json's
# `price` definition takes the same (ci/schema_enums.py writes it from this).
PRICE_TEXT = r"^[0-9]+(\.[0-9]+)?$"


def _is_price(value: object) -> bool:
    if isinstance(value, str):
        return re.fullmatch(PRICE_TEXT, value) is not None
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


_OVERRIDES_FIX = (
    'a map of generation to {capacity or "region/capacity": USD}: {"v6e": {"spot": 1.1}}'
)


def parse_overrides(raw: str, where: str = "cost.pricesPerChipHour") -> dict[str, dict[str, float]]:
    """The values' `cost.pricesPerChipHour` as JSON, checked: a wrong shape is refused with
    where it came from."""
    try:
        data = json.loads(raw) if raw else {}
    except json.JSONDecodeError as e:
        raise UsageError(where, f"is not JSON ({e})", _OVERRIDES_FIX) from e
    return checked_overrides(data, where, raw)


def checked_overrides(
    data: object, where: str = "cost.pricesPerChipHour", said: str | None = None
) -> dict[str, dict[str, float]]:
    """`cost.pricesPerChipHour` as read (values, or the release's facts), checked: a wrong
    shape is refused with where it came from (`said`: as it was written)."""
    if not isinstance(data, dict) or not all(
        isinstance(by, dict) and all(map(_is_price, by.values())) for by in data.values()
    ):
        raise UsageError(where, f"is {said if said is not None else data}", _OVERRIDES_FIX)
    return {gen: {key: float(p) for key, p in by.items()} for gen, by in data.items()}


def price_of(
    generation: str,
    capacity: str | None,
    region: str = "",
    overrides: Mapping[str, Mapping[str, float]] | None = None,
) -> Price | None:
    """The price of one chip-hour of `generation` on `capacity` (None: unknown, taken as
    on-demand) in `region`: the release's override for that region, then its override for any
    region, then the list price; None where none is known."""
    known, capacity = capacity is not None, capacity or ON_DEMAND
    given = (overrides or {}).get(generation, {})
    for key in ([f"{region}/{capacity}"] if region else []) + [capacity]:
        if key in given:
            return Price(given[key], f"the release's cost.pricesPerChipHour for {generation} {key}")
    listed = LIST_PRICES.get(generation, {}).get(BILLED_AS.get(capacity, capacity))
    if listed is None:
        return None
    billed = f"{capacity}, billed as on-demand" if capacity in BILLED_AS else capacity
    if not known:
        billed = "on-demand (the capacity not known)"
    return Price(listed, f"list price for {generation} {billed}, {PRICES_AS_OF}, {PRICES_SOURCE}")


def no_price_reason(generation: str, capacity: str | None) -> str:
    """Why a job has no cost, and how to give it one."""
    return (
        f"no price for {generation} {capacity or ON_DEMAND} in the table ({PRICES_SOURCE} "
        f"publishes list prices for {', '.join(sorted(LIST_PRICES))} on-demand): set the "
        f"release's cost.pricesPerChipHour or the job's --price_per_chip_hour"
    )


@dataclass(frozen=True)
class JobCost:
    """What a run's chips cost: the chips it held for its wall time, at one price."""

    usd_per_chip_hour: float
    price_source: str
    chips: int
    chip_hours: float
    usd: float
    usd_not_productive: float  # the wall time that was not productive steps (goodput applied)
    usd_per_useful_step: float | None
    usd_per_million_tokens: float | None

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobCost:
        return cls(**{f.name: data[f.name] for f in fields(cls)})


def job_cost(
    price: Price, chips: int, wall_seconds: float, goodput: float, useful_steps: int, tokens: int
) -> JobCost:
    """The cost of `chips` held for `wall_seconds`; per useful step (the steps the run trained,
    each once) and per million of the `tokens` they trained on."""
    chip_hours = chips * wall_seconds / 3600
    usd = chip_hours * price.usd_per_chip_hour
    return JobCost(
        price.usd_per_chip_hour,
        price.source,
        chips,
        chip_hours,
        usd,
        usd * max(0.0, 1.0 - goodput),
        usd / useful_steps if useful_steps > 0 else None,
        usd / (tokens / 1e6) if tokens > 0 else None,
    )


def format_cost(cost: JobCost) -> str:
    """The summary's cost line."""
    parts = [
        f"${cost.usd:.2f} for {cost.chip_hours:.3f} chip-hours ({cost.chips} chips at "
        f"${cost.usd_per_chip_hour:.2f})"
    ]
    if cost.usd_per_useful_step is not None:
        parts.append(f"${cost.usd_per_useful_step:.4f} per useful step")
    if cost.usd_per_million_tokens is not None:
        parts.append(f"${cost.usd_per_million_tokens:.4f} per million tokens")
    parts.append(f"${cost.usd_not_productive:.2f} of it not productive steps")
    return "cost:         " + "; ".join(parts)


def table_json() -> dict[str, Any]:
    """The chart's copy (files/tpu-table.json's `prices`)."""
    return {"asOf": PRICES_AS_OF, "source": PRICES_SOURCE, "usdPerChipHour": LIST_PRICES}
