"""`monitoring.enabled`: Prometheus' scrape objects for the release's Ray pods and vLLM server,
checked against their CRDs (GKE managed Prometheus' PodMonitoring, prometheus-operator's
PodMonitor, from their pinned Go modules), the NetworkPolicy rule that lets the scraper in, and
the dashboard ConfigMap, which must be the launcher's own dashboard."""

from __future__ import annotations

import json

import pytest
import yaml

from harness.helm import VALUES_FILES, by_kind, refused, render
from launcher.core.job.dashboard import dashboard
from tests.support.k8s_schemas import validate

pytestmark = pytest.mark.chart

ON = ("--set", "monitoring.enabled=true")
ENDPOINTS = {"PodMonitoring": "endpoints", "PodMonitor": "podMetricsEndpoints"}
# GKE managed Prometheus' collectors: a DaemonSet of these pods in gmp-system (its operator's
# pkg/operator: NameCollector, the namespace it manages).
GMP_COLLECTORS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gmp-system"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "collector"}},
}


def _serves_no_metrics(values) -> bool:
    v = yaml.safe_load(values.read_text())
    return v.get("ray", {}).get("enabled") is False and v["serving"]["engine"] == "saxml"


def _pods(docs: list[dict]) -> list[tuple[str, dict, int]]:
    """(what, pod template, the port its metrics are on) of every pod that serves metrics: Ray's
    head and workers on KubeRay's metrics port, vLLM on its API port."""
    pods = []
    for cluster in by_kind(docs, "RayCluster"):
        spec = cluster["spec"]
        pods.append(("ray head", spec["headGroupSpec"]["template"], 8080))
        pods += [("ray worker", g["template"], 8080) for g in spec["workerGroupSpecs"]]
    for service in by_kind(docs, "RayService"):  # vLLM on Ray Serve LLM: Ray's port
        spec = service["spec"]["rayClusterConfig"]
        pods.append(("vllm head", spec["headGroupSpec"]["template"], 8080))
        pods += [("vllm host", g["template"], 8080) for g in spec["workerGroupSpecs"]]
    for deployment in by_kind(docs, "Deployment"):
        template = deployment["spec"]["template"]
        if template["metadata"]["labels"].get("app.kubernetes.io/component") == "vllm":
            (port,) = template["spec"]["containers"][0]["ports"]
            pods.append(("vllm", template, port["containerPort"]))
    return pods


def _selects(selector: dict, template: dict) -> bool:
    labels = template["metadata"]["labels"]
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def _admitted(policies: list[dict], template: dict, port: int) -> list[dict]:
    """The peers the NetworkPolicies that select the pod admit to `port`."""
    return [
        peer
        for policy in policies
        if _selects(policy["spec"]["podSelector"], template)
        for rule in policy["spec"].get("ingress", [])
        if any(p["port"] == port for p in rule.get("ports", []))
        for peer in rule["from"]
    ]


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda p: p.name)
def test_every_values_file_renders_its_scrape_objects_and_the_dashboard(values):
    if _serves_no_metrics(values):  # Saxml alone: refused, not an object that scrapes nothing
        assert "Saxml's servers serve no Prometheus metrics" in refused(*ON, values=values)
        return
    docs = render(values, *ON)
    scrapes = by_kind(docs, "PodMonitoring")
    pods = _pods(docs)
    assert scrapes and pods
    for scrape in scrapes:
        assert validate(scrape) == [], scrape
        assert scrape["apiVersion"] == "monitoring.googleapis.com/v1"
        assert any(_selects(scrape["spec"]["selector"], t) for _, t, _ in pods), scrape
    policies = by_kind(docs, "NetworkPolicy")
    for what, template, port in pods:
        (scrape,) = [s for s in scrapes if _selects(s["spec"]["selector"], template)]
        (endpoint,) = scrape["spec"]["endpoints"]
        # Ray's port is the one KubeRay adds to each Ray container by name (the cluster tests
        # read it off the live pods); vLLM's is the chart's own.
        expected = "metrics" if port == 8080 else "http"
        assert (endpoint["port"], endpoint["path"]) == (expected, "/metrics"), what
        assert GMP_COLLECTORS in _admitted(policies, template, port), what
    boards = [c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")]
    if by_kind(docs, "RayCluster"):
        (board,) = boards
        assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(board["data"]["tpu-launcher-jobs.json"]) == dashboard()
    else:
        assert boards == []


def test_a_podmonitor_for_prometheus_operator_admits_the_named_scrapers():
    scraper = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    docs = render(
        None,
        *ON,
        "--set",
        "monitoring.kind=PodMonitor",
        "--set",
        "monitoring.labels.release=kube-prometheus-stack",
        "--set",
        "monitoring.interval=15s",
        "--set-json",
        f"monitoring.scrapers=[{json.dumps(scraper)}]",
    )
    assert by_kind(docs, "PodMonitoring") == []
    (monitor,) = by_kind(docs, "PodMonitor")
    assert validate(monitor) == [], monitor
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["podMetricsEndpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "15s"}
    ]
    policies = by_kind(docs, "NetworkPolicy")
    for _, template, port in _pods(docs):
        assert scraper in _admitted(policies, template, port)
        assert GMP_COLLECTORS not in _admitted(policies, template, port)


def test_off_by_default_and_nothing_admitted_to_the_metrics_port():
    docs = render(None)
    assert not by_kind(docs, "PodMonitoring") and not by_kind(docs, "PodMonitor")
    assert not [
        c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")
    ]
    policies = by_kind(docs, "NetworkPolicy")
    for _, template, port in _pods(docs):
        assert _admitted(policies, template, port) == []


def test_the_dashboard_can_be_left_out():
    docs = render(None, *ON, "--set", "monitoring.dashboard.enabled=false")
    assert by_kind(docs, "PodMonitoring")
    assert not [
        c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")
    ]
