"""Every rendered object satisfies its schema: the CRDs for RayCluster and JobSet, Kubernetes'
OpenAPI for the rest; unknown fields included (a structural schema would drop them silently)."""

from __future__ import annotations

import pytest

from ci.cluster.gke_nodes import merged_values
from harness.helm import VALUES_FILES, render
from launcher.core.tpu.table import tpu_type
from tests.support.k8s_schemas import validate

pytestmark = pytest.mark.chart


# Each values file with each serving engine, so every template is checked with every slice.
# (vLLM reads its model from the bucket: cpu.yaml's release, without one, is refused otherwise.)
ENGINES = {
    "saxml": ("JobSet",),
    "vllm": (
        "Deployment",
        *("--set", "vllm.model=/data/m", "--set", "global.gcsfuse.enabled=true"),
        *("--set", "vllm.apiKey.secretName=k"),
    ),
}


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda p: p.name)
def test_rendered_objects_satisfy_their_schemas(values, engine):
    kind, *sets = ENGINES[engine]
    docs = render(values, "--set", f"serving.engine={engine}", *sets)
    kinds = {d["kind"] for d in docs}
    if kind == "Deployment" and tpu_type(merged_values(values)["vllm"]["tpu"]["type"]).multi_host:
        kind = "RayService"  # vLLM on a multi-host slice: Ray Serve LLM
    assert kind in kinds
    assert ("RayCluster" in kinds) == merged_values(values)["ray"]["enabled"]
    for doc in docs:
        errors = validate(doc)
        assert not errors, f"{doc['kind']} {doc['metadata']['name']}:\n" + "\n".join(errors)


@pytest.mark.parametrize("controller", ["rayservice", "lws"])
@pytest.mark.parametrize("tpu", ["v6e-16", "v5p-16", "tpu7x-16"])
def test_multi_host_vllm_satisfies_its_crd(tpu, controller):
    sets = ENGINES["vllm"][1:]
    docs = render(
        None,
        *sets,
        "--set",
        "serving.engine=vllm",
        "--set",
        f"vllm.tpu.type={tpu}",
        "--set",
        f"vllm.controller={controller}",
        "--set",
        "ray.enabled=false",
    )
    (server,) = [d for d in docs if d["kind"] in ("RayService", "LeaderWorkerSet")]
    assert server["kind"] == {"rayservice": "RayService", "lws": "LeaderWorkerSet"}[controller]
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


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda p: p.name)
def test_a_rayjob_release_satisfies_the_rayjob_crd(values):
    job = ["--set", "ray.job.enabled=true", "--set-json", 'ray.job.args=["base.yml","run_name=r"]']
    docs = render(values, *job, "--set", "kueue.queueName=team-a")
    if not merged_values(values)["ray"]["enabled"]:
        assert not [d for d in docs if d["kind"] == "RayJob"]
        return
    (rayjob,) = [d for d in docs if d["kind"] == "RayJob"]
    assert not [d for d in docs if d["kind"] == "RayCluster"]
    errors = validate(rayjob)
    assert not errors, "\n".join(errors)
