#!/usr/bin/env python3
"""Writes the TPU table's derived names into values.schema.json, so the schema never lists a
generation, node label or machine type the table does not have (nor misses one it has: the
hand-kept pattern once refused Ironwood's real label, tpu7x); and the launcher's own words for
a choice (a capacity fallback's walkers, launcher.core.tpu.capacity.FALLBACKS; the generations and
capacities cost.pricesPerChipHour is keyed by; the checkpoint tiers).

ci/schema_enums.py charts/tpu-stack/values.schema.json --check  # exit 1 if it is stale
ci/schema_enums.py charts/tpu-stack/values.schema.json --write  # rewrite it

`type` stays a pattern: the chart's own check answers an unknown name with its neighbours
(v6e-20: v6e-16 or v6e-32), which an enum of every name, checked first, would hide.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from launcher.core.job.checkpoint_tiers import TIERS
from launcher.core.tpu.capacity import CAPACITIES, FALLBACKS
from launcher.core.tpu.prices import PRICE_TEXT
from launcher.core.tpu.table import GENERATIONS


def enums() -> dict[str, list[str]]:
    """The tpuSlice keys the table derives, each with every value it allows ("": derived)."""
    gens = GENERATIONS.values()
    return {
        "generation": ["", *sorted(g.name for g in gens)],
        "gkeAccelerator": ["", *sorted({g.gke_accelerator for g in gens})],
        "machineType": ["", *sorted({m for g in gens for m in g.machines.values()})],
    }


WHAT = {
    "generation": "derived from type: the TPU generation",
    "gkeAccelerator": "derived from type: the nodes' cloud.google.com/gke-tpu-accelerator label",
    "machineType": "derived from type and chipsPerHost: the Compute Engine machine type",
}


# Choices a user makes, from the launcher's own words: key -> (values, description).
CHOICES = {
    "capacityFallback": (
        ["", *FALLBACKS],
        "with a capacity list: who walks it: a GKE ComputeClass (computeclass) or the Kueue "
        "queue's flavors (kueue); empty: kueue where kueue.queueName is set (Ray workers), else "
        "computeclass",
    ),
}


# A Compute Engine region's name (us-east5, europe-west4, northamerica-northeast1).
REGION = "[a-z]+-[a-z]+[0-9]+"


def price_keys() -> dict:
    """cost.pricesPerChipHour's keys: a generation of the table, then a capacity of the
    launcher's (CAPACITIES), alone or after a region (`us-east5/spot`). Named by properties and
    patternProperties, never propertyNames: Helm's JSON-schema library reports a propertyNames
    refusal at a random key (santhosh-tekuri/jsonschema#258)."""
    capacities = "|".join(sorted(CAPACITIES))
    by_capacity = {
        "type": "object",
        "patternProperties": {f"^({REGION}/)?({capacities})$": {"$ref": "#/definitions/price"}},
        "additionalProperties": False,
    }
    return {
        "properties": {name: by_capacity for name in sorted(GENERATIONS)},
        "additionalProperties": False,
    }


def with_enums(schema: dict) -> dict:
    cost = schema["properties"]["cost"]["properties"]
    prices = cost["pricesPerChipHour"]
    cost["pricesPerChipHour"] = {
        "type": "object",
        "description": prices["description"],
        **price_keys(),
    }
    cost["region"]["pattern"] = f"^({REGION})?$"
    schema["definitions"]["price"]["pattern"] = PRICE_TEXT
    schema["properties"]["checkpoints"]["properties"]["tier"]["enum"] = list(TIERS)
    props = schema["definitions"]["tpuSlice"]["properties"]
    for key, values in enums().items():
        props[key] = {
            "type": "string",
            "enum": values,
            "description": f"{WHAT[key]} (empty, or checked against it when set)",
        }
    for key, (values, what) in CHOICES.items():
        props[key] = {"type": "string", "enum": values, "description": what}
    return schema


def main(path: str, mode: str) -> int:
    file = Path(path)
    text = file.read_text()
    fresh = json.dumps(with_enums(json.loads(text)), indent=2) + "\n"
    if mode == "--write":
        file.write_text(fresh)
        return 0
    if fresh != text:
        print(f"{path}: the tpuSlice enums are stale: run make chart-table", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("--check", "--write"):
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
