"""GKE's own published rules, read from its API discovery document (`container` v1), which
google-api-python-client ships (pinned in the dev lock, dated by the document's `revision`): a
field's name and type, and the rules its description states ("Allowed values: ...",
"Range: [a, b]"). No network and no account; our reading of GKE's pages is not the authority."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any


@cache
def document() -> dict[str, Any]:
    import googleapiclient

    path = Path(googleapiclient.__file__).parent / "discovery_cache/documents/container.v1.json"
    return json.loads(path.read_text())


def revision() -> str:
    return str(document()["revision"])


def field(schema: str, name: str) -> dict[str, Any]:
    """A field of one of the API's schemas (NodeKubeletConfig, NodeConfig, ...)."""
    properties = document()["schemas"][schema]["properties"]
    assert name in properties, f"GKE's {schema} has no field {name} (revision {revision()})"
    return properties[name]


def allowed_values(schema: str, name: str) -> tuple[int, ...] | None:
    """The values a field's description allows ("Allowed values: 0, 30, 120."), or None."""
    m = re.search(r"Allowed values: ([\d, ]+)\.", field(schema, name).get("description", ""))
    return tuple(int(v) for v in m[1].split(",")) if m else None


def value_range(schema: str, name: str) -> tuple[int, int] | None:
    """The range a field's description states ("Range: [0, 120]."), or None."""
    m = re.search(r"Range: \[(\d+), (\d+)\]", field(schema, name).get("description", ""))
    return (int(m[1]), int(m[2])) if m else None
