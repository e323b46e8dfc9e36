"""The values reference is complete: every value documented and in the schema (`make verify`
checks that the README's table is the one generated from them)."""

from __future__ import annotations

import json

import pytest
import yaml

from harness.helm import CHART

pytestmark = pytest.mark.chart


def _leaves(node, prefix=()):
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, (*prefix, key))
    else:
        yield ".".join(prefix)


def test_every_value_is_documented():
    from ci.values_docs import rows

    documented = {key for key, _, _ in rows(CHART / "values.yaml")}
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    undocumented = [
        leaf
        for leaf in _leaves(values)
        if not any(leaf == d or leaf.startswith(d + ".") for d in documented)
    ]
    assert not undocumented


def test_every_value_is_in_the_schema():
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for leaf in _leaves(values):
        node = schema
        for key in leaf.split("."):
            if "$ref" in node:  # "#/definitions/<name>", shared by the TPU blocks
                node = schema["definitions"][node["$ref"].rsplit("/", 1)[1]]
            free_form = node.get("type") == "object" and "properties" not in node
            assert free_form or key in node.get("properties", {}), leaf
            node = node.get("properties", {}).get(key, {})
