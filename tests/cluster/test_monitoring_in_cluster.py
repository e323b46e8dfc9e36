"""`monitoring.enabled` in the real control plane: the scrape objects' CRDs (GKE managed
Prometheus' PodMonitoring and prometheus-operator's PodMonitor, from their pinned Go modules)
are applied as a cluster with either would have them; the release's PodMonitoring is accepted
and selects exactly the live Ray pods, each of which KubeRay gave the `metrics` port it names;
the NetworkPolicy admits the collectors to it. The PodMonitor and vLLM's objects pass a
server-side dry run."""

from __future__ import annotations

import json
import subprocess

import pykube
import pytest
import yaml

from harness.helm import render
from harness.kube import Release
from tests.cluster.test_chart_in_cluster import HEAD, VALUES, WORKER, wait_ready
from tests.support.k8s_schemas import CRD_FILES, module_dir

pytestmark = pytest.mark.cluster

SCRAPE_KINDS = (
    ("monitoring.googleapis.com", "PodMonitoring"),
    ("monitoring.coreos.com", "PodMonitor"),
)


@pytest.fixture
def monitoring_crds(release: Release) -> Release:
    """The two scrape CRDs in the cluster (idempotent: server-side apply), established."""
    for key in SCRAPE_KINDS:
        module, path = CRD_FILES[key]
        crd = module_dir(module) / path
        _kubectl(release, "apply", "--server-side", "--force-conflicts", "-f", str(crd))
        name = yaml.safe_load(crd.read_text())["metadata"]["name"]
        _kubectl(release, "wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")
    return release


def _kubectl(rel: Release, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run([*rel.kubectl(), *args], input=stdin, capture_output=True, text=True)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
    return proc.stdout


def test_the_podmonitoring_selects_every_live_ray_pod_on_its_metrics_port(
    monitoring_crds: Release, tmp_path
):
    release = monitoring_crds
    values = VALUES / "cpu.yaml"
    on = tmp_path / "monitoring.yaml"
    on.write_text(yaml.safe_dump({"monitoring": {"enabled": True}}))
    release.add_nodes_for(values)
    release.install(values, on)
    wait_ready(release, timeout=60)

    kind = pykube.object_factory(release.api, "monitoring.googleapis.com/v1", "PodMonitoring")
    (scrape,) = [o.obj for o in kind.objects(release.api).filter(namespace=release.namespace)]
    selected = {p.name for p in release.pods(**scrape["spec"]["selector"]["matchLabels"])}
    ray_pods = release.pods(**HEAD) + release.pods(**WORKER)
    assert selected == {p.name for p in ray_pods} and len(ray_pods) == 3
    (endpoint,) = scrape["spec"]["endpoints"]
    for pod in ray_pods:  # KubeRay's port, named as the endpoint names it, on every Ray pod
        (container,) = [c for c in pod.obj["spec"]["containers"] if c["name"].startswith("ray-")]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports.get(endpoint["port"]) == 8080, (pod.name, ports)

    policy = pykube.object_factory(release.api, "networking.k8s.io/v1", "NetworkPolicy")
    (ray_policy,) = [
        p.obj
        for p in policy.objects(release.api).filter(namespace=release.namespace)
        if p.obj["spec"]["podSelector"] == scrape["spec"]["selector"]
    ]
    metrics_port = {"port": 8080, "protocol": "TCP"}
    scrapers = [r for r in ray_policy["spec"]["ingress"] if metrics_port in r.get("ports", [])]
    assert [peer["namespaceSelector"] for r in scrapers for peer in r["from"]] == [
        {"matchLabels": {"kubernetes.io/metadata.name": "gmp-system"}}
    ]
    boards = pykube.ConfigMap.objects(release.api).filter(namespace=release.namespace)
    (board,) = [b for b in boards if b.name.endswith("-dashboard")]
    assert json.loads(board.obj["data"]["tpu-launcher-jobs.json"])["panels"]


def test_podmonitor_and_vllms_objects_pass_a_server_side_dry_run(monitoring_crds: Release):
    release = monitoring_crds
    scraper = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    docs = render(
        VALUES / "v6e-8-vllm.yaml",
        "--set",
        "monitoring.enabled=true",
        "--set",
        "monitoring.kind=PodMonitor",
        "--set-json",
        f"monitoring.scrapers=[{json.dumps(scraper)}]",
    ) + render(VALUES / "v6e-16.yaml", "--set", "monitoring.enabled=true")
    objects = [d for d in docs if d["kind"] in ("PodMonitor", "PodMonitoring")]
    assert sorted(d["kind"] for d in objects) == ["PodMonitor", "PodMonitoring"]
    for obj in objects:
        out = _kubectl(
            release,
            "create",
            "--dry-run=server",
            "-n",
            release.namespace,
            "-o",
            "json",
            "-f",
            "-",
            stdin=json.dumps(obj),
        )
        # Accepted as rendered: nothing the CRD's schema prunes (an unknown field would vanish).
        assert json.loads(out)["spec"] == obj["spec"], obj["kind"]
