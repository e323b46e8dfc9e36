"""Every rendered object satisfies its schema: the CRDs for RayCluster and JobSet, Kubernetes'
OpenAPI for the rest; unknown fields included (a structural schema would drop them silently)."""

from __future__ import annotations

import pytest

from tests.support.helm import VALUES_FILES, render
from tests.support.k8s_schemas import validate

pytestmark = pytest.mark.chart


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda p: p.name)
def test_rendered_objects_satisfy_their_schemas(values):
    docs = render(values, "--set", "saxml.enabled=true")
    kinds = {d["kind"] for d in docs}
    assert "JobSet" in kinds
    assert ("RayCluster" in kinds) == ("saxml" not in values.name)  # the Saxml file is serving only
    for doc in docs:
        errors = validate(doc)
        assert not errors, f"{doc['kind']} {doc['metadata']['name']}:\n" + "\n".join(errors)


def test_the_validators_catch_an_unknown_field():
    (cluster,) = [d for d in render(None) if d["kind"] == "RayCluster"]
    cluster["spec"]["workerGroupSpecs"][0]["numOfHost"] = 4
    assert any("numOfHost" in e for e in validate(cluster))
    sa = next(d for d in render(None) if d["kind"] == "ServiceAccount")
    sa["metadata"]["labelz"] = {}
    assert any("labelz" in e for e in validate(sa))
