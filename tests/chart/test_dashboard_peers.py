"""Who the release's NetworkPolicies let reach a Ray head's dashboard (8265), beside the clients:
a RayJob's submitter pod (KubeRay runs `ray job submit` in it: controllers/ray/rayjob_controller.go,
createNewK8sJob, which adds no label of its own to the chart's submitterPodTemplate) and the
KubeRay operator where its peer is named (it follows a RayJob's job through GetJobInfo and puts a
RayService's Serve config through the dashboard); and every Ray cluster of the chart asks for
Ray's token. The node tier (tests/node) sends the traffic through an enforcing network."""

from __future__ import annotations

import json

import pytest

from harness.helm import VALUES, by_kind, refused, render

pytestmark = pytest.mark.chart

JOB = ("--set", "ray.job.enabled=true", "--set-json", 'ray.job.args=["base.yml","run_name=r"]')
OPERATOR = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ray-system"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}},
}


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _admitted_to(policy: dict, labels: dict, port: int) -> bool:
    """Whether a pod of the release's namespace with these labels may reach `port`."""
    for rule in policy["spec"].get("ingress", []):
        ports = {p["port"] for p in rule.get("ports", [])}
        if ports and port not in ports:
            continue
        for peer in rule.get("from", []):
            if set(peer) == {"podSelector"} and _selects(peer["podSelector"], labels):
                return True
    return False


def _peers_on(policy: dict, port: int) -> list[dict]:
    return [
        peer
        for rule in policy["spec"].get("ingress", [])
        if port in {p["port"] for p in rule.get("ports", [])}
        for peer in rule.get("from", [])
    ]


def _ray_policy(docs: list[dict]) -> dict:
    (policy,) = [
        p
        for p in by_kind(docs, "NetworkPolicy")
        if p["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/name") == "kuberay"
    ]
    return policy


def test_the_rayjob_submitter_pod_reaches_the_dashboard_and_nothing_else():
    docs = render(VALUES / "v6e-16.yaml", *JOB)
    (job,) = by_kind(docs, "RayJob")
    submitter = job["spec"]["submitterPodTemplate"]["metadata"]["labels"]
    policy = _ray_policy(docs)
    assert _admitted_to(policy, submitter, 8265)
    assert not _admitted_to(policy, submitter, 10001)
    assert not _admitted_to(policy, submitter, 6379)


def test_a_standing_cluster_admits_no_submitter():
    docs = render(VALUES / "v6e-16.yaml")
    submitter = {
        "app.kubernetes.io/name": "tpu-stack",
        "app.kubernetes.io/instance": "tpu",
        "app.kubernetes.io/component": "ray-job-submitter",
    }
    assert not _admitted_to(_ray_policy(docs), submitter, 8265)


def test_the_operator_peer_reaches_a_rayjob_and_a_rayservice_dashboard():
    operator = ("--set-json", f"networkPolicy.kuberayOperator={json.dumps([OPERATOR])}")
    job_docs = render(VALUES / "v6e-16.yaml", *JOB, *operator)
    assert OPERATOR in _peers_on(_ray_policy(job_docs), 8265)
    # Not on a standing RayCluster: KubeRay calls no dashboard for one.
    assert OPERATOR not in _peers_on(_ray_policy(render(VALUES / "v6e-16.yaml", *operator)), 8265)
    serve_docs = render(VALUES / "v6e-16-vllm.yaml", *operator)
    (service,) = by_kind(serve_docs, "RayService")
    head_labels = service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["metadata"][
        "labels"
    ]
    (head_policy,) = [
        p
        for p in by_kind(serve_docs, "NetworkPolicy")
        if _selects(p["spec"]["podSelector"], head_labels)
    ]
    assert OPERATOR in _peers_on(head_policy, 8265)
    # KubeRay 1.6.2 checks the head's Serve proxy on the serving port from the operator too
    # (rayservice_controller.go updateHeadPodServeLabel): without it the head leaves the
    # serve Service's endpoints.
    assert OPERATOR in _peers_on(head_policy, 8000)
    # Without the value nothing is admitted to it there.
    (head_policy,) = [
        p
        for p in by_kind(render(VALUES / "v6e-16-vllm.yaml"), "NetworkPolicy")
        if _selects(p["spec"]["podSelector"], head_labels)
    ]
    assert _peers_on(head_policy, 8265) == []


def test_every_ray_cluster_of_the_chart_asks_for_the_token():
    (cluster,) = by_kind(render(VALUES / "v6e-16.yaml"), "RayCluster")
    (job,) = by_kind(render(VALUES / "v6e-16.yaml", *JOB), "RayJob")
    (service,) = by_kind(render(VALUES / "v6e-16-vllm.yaml"), "RayService")
    for spec in (
        cluster["spec"],
        job["spec"]["rayClusterSpec"],
        service["spec"]["rayClusterConfig"],
    ):
        assert spec["authOptions"] == {"mode": "token"}


def test_a_catch_all_operator_peer_is_refused():
    err = refused(
        "--set-json", 'networkPolicy.kuberayOperator=[{"ipBlock":{"cidr":"0.0.0.0/0"}}]', *JOB
    )
    assert "networkPolicy.kuberayOperator[0].ipBlock.cidr" in err


def test_a_rayservice_names_its_serving_port_as_kuberay_looks_for_it():
    """KubeRay 1.6.2 finds a RayService's serving port by the name `serve` (else 8000) for the
    workers' readiness probe (common/pod.go) and its health check of the head's proxy: another
    vllm.containerPort is found on every host, and the release's Service targets it."""
    operator = ("--set-json", f"networkPolicy.kuberayOperator={json.dumps([OPERATOR])}")
    docs = render(VALUES / "v6e-16-vllm.yaml", "--set", "vllm.containerPort=9000", *operator)
    (service,) = by_kind(docs, "RayService")
    cluster = service["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    for group in groups:
        (container,) = group["template"]["spec"]["containers"]
        assert {"name": "serve", "containerPort": 9000} in container["ports"], group
    (svc,) = [s for s in by_kind(docs, "Service") if s["spec"]["ports"][0]["name"] == "http"]
    assert svc["spec"]["ports"][0]["targetPort"] == "serve"
    head_labels = cluster["headGroupSpec"]["template"]["metadata"]["labels"]
    (head_policy,) = [
        p for p in by_kind(docs, "NetworkPolicy") if _selects(p["spec"]["podSelector"], head_labels)
    ]
    assert OPERATOR in _peers_on(head_policy, 9000)
