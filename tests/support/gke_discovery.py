"""Google's own published rules, read from its APIs' discovery documents (`container` v1 for
GKE, `artifactregistry` v1), which google-api-python-client ships (pinned in the dev lock,
dated by each document's `revision`): a field's name and type, its enum, and the rules its
description states ("Allowed values: ...", "Range: [a, b]"). No network and no account; our
reading of Google's pages is not the authority."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any


@cache
def document(api: str = "container") -> dict[str, Any]:
    import googleapiclient

    path = Path(googleapiclient.__file__).parent / f"discovery_cache/documents/{api}.v1.json"
    return json.loads(path.read_text())


def revision(api: str = "container") -> str:
    return str(document(api)["revision"])


def field(schema: str, name: str, api: str = "container") -> dict[str, Any]:
    """A field of one of the API's schemas (NodeKubeletConfig, NodeConfig, ...)."""
    properties = document(api)["schemas"][schema]["properties"]
    assert name in properties, f"{api}'s {schema} has no field {name} (revision {revision(api)})"
    return properties[name]


def allowed_values(schema: str, name: str) -> tuple[int, ...] | None:
    """The values a field's description allows ("Allowed values: 0, 30, 120."), or None."""
    return _allowed(field(schema, name))


def value_range(schema: str, name: str) -> tuple[int, int] | None:
    """The range a field's description states ("Range: [0, 120]."), or None."""
    return _range(field(schema, name))


def _allowed(spec: dict[str, Any]) -> tuple[int, ...] | None:
    m = re.search(r"Allowed values: ([\d, ]+)\.", spec.get("description", ""))
    return tuple(int(v) for v in m[1].split(",")) if m else None


def _range(spec: dict[str, Any]) -> tuple[int, int] | None:
    m = re.search(r"Range: \[(\d+), (\d+)\]", spec.get("description", ""))
    return (int(m[1]), int(m[2])) if m else None


def resolve(schema: str, dotted: str, api: str = "container") -> dict[str, Any] | str:
    """The field a dotted path names from a schema (`config.kubeletConfig.shutdownGracePeriod
    Seconds` from NodePool): its spec, or why there is none. A map's keys are free (`resource
    Labels.created-by`); an array's items are its elements."""
    schemas = document(api)["schemas"]
    spec: dict[str, Any] = {"$ref": schema}
    walked = schema
    for part in dotted.split("."):
        while "$ref" in spec or spec.get("type") == "array":
            spec = schemas[spec["$ref"]] if "$ref" in spec else spec["items"]
        if "additionalProperties" in spec:
            spec = spec["additionalProperties"]
        elif part in spec.get("properties", {}):
            spec = spec["properties"][part]
        else:
            return f"{walked} has no field {part!r} ({api} v1, revision {revision(api)})"
        walked += f".{part}"
    while "$ref" in spec:
        spec = schemas[spec["$ref"]]
    return spec


def refusal(spec: dict[str, Any], value: str) -> str | None:
    """Why the API would refuse `value` for a field, by its type, enum and stated rules."""
    kind = spec.get("type")
    if "enum" in spec and value not in spec["enum"]:
        return f"{value!r} is not one of {spec['enum']}"
    if kind == "boolean" and value not in ("true", "false"):
        return f"{value!r} is not a boolean"
    if kind == "integer":
        if not re.fullmatch(r"-?\d+", value):
            return f"{value!r} is not an integer"
        if (allowed := _allowed(spec)) is not None and int(value) not in allowed:
            return f"{value} is not an allowed value ({', '.join(map(str, allowed))})"
        if (bounds := _range(spec)) is not None and not bounds[0] <= int(value) <= bounds[1]:
            return f"{value} is outside [{bounds[0]}, {bounds[1]}]"
    if kind == "object" and "additionalProperties" not in spec:
        return f"{value!r} given for an object"
    return None
