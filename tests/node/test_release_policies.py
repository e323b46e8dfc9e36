"""The release's NetworkPolicies, as the chart renders them, enforced on real pods: who reaches a
Ray head's dashboard (8265) and client port (10001). The head here is a STAND-IN (the probe
image's HTTP server and listener on the head's ports, under the labels the chart gives the Ray
head), so that each rule is seen alone; tests/node/test_ray_on_the_node.py runs Ray itself."""

from __future__ import annotations

import copy
import json

import pytest

from harness.helm import VALUES, by_kind, render
from harness.node import NodeCluster, probe_pod

pytestmark = pytest.mark.node

JOB = ("--set", "ray.job.enabled=true", "--set-json", 'ray.job.args=["base.yml","run_name=r"]')


def _head(cluster: NodeCluster, namespace: str, labels: dict) -> str:
    """A stand-in head listening on the dashboard and client ports; returns its pod IP."""
    script = "httpd -f -p 8265 -h /www & while true; do nc -l -p 10001 -e echo client; done"
    cluster.apply(
        probe_pod("head", namespace, labels, cluster.images["probe"], script, never=False)
    )

    def ip() -> str | None:
        pod = cluster.get("pod", "head", namespace) or {}
        ready = any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in pod.get("status", {}).get("conditions", [])
        )
        return pod["status"].get("podIP") if ready else None

    return cluster.wait(
        "the stand-in head to run", ip, explain=lambda: _describe(cluster, namespace)
    )


def _reaches(
    cluster: NodeCluster, namespace: str, name: str, labels: dict, ip: str, port: int
) -> bool:
    """Whether a pod with these labels in this namespace connects to ip:port (3 s to answer)."""
    script = f"nc -w 3 {ip} {port} </dev/null >/dev/null && echo open || (echo closed; exit 1)"
    cluster.apply(probe_pod(name, namespace, labels, cluster.images["probe"], script, never=True))
    phase = cluster.wait(
        f"the probe {name} to end",
        lambda: (
            (cluster.get("pod", name, namespace) or {}).get("status", {}).get("phase")
            in ("Succeeded", "Failed")
            and cluster.get("pod", name, namespace)["status"]["phase"]
        ),
        explain=lambda: _describe(cluster, namespace),
    )
    cluster.kubectl("-n", namespace, "delete", "pod", name, "--wait=false")
    return phase == "Succeeded"


def _reaches_once_programmed(
    cluster: NodeCluster, namespace: str, name: str, labels: dict, ip: str, port: int
) -> bool:
    """`_reaches`, tried up to three times: kube-router programs a policy's rules some seconds
    after it is applied (one run here refused the first probe of an admitted pod and admitted
    it alone). Only what must connect is retried; every refusal is one try."""
    return any(_reaches(cluster, namespace, f"{name}-{n}", labels, ip, port) for n in range(3))


def _describe(cluster: NodeCluster, namespace: str) -> str:
    return cluster.kubectl("-n", namespace, "describe", "pods", check=False)[-4000:]


def _policies(docs: list[dict], namespace: str) -> list[dict]:
    policies = copy.deepcopy(by_kind(docs, "NetworkPolicy"))
    for p in policies:
        p["metadata"]["namespace"] = namespace
    return policies


def test_a_rayjob_submitter_reaches_the_dashboard_and_an_outsider_does_not(
    node_cluster: NodeCluster, namespace: str
):
    docs = render(VALUES / "v6e-16.yaml", *JOB, "--namespace", namespace)
    (job,) = by_kind(docs, "RayJob")
    head_labels = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["metadata"]["labels"]
    submitter = job["spec"]["submitterPodTemplate"]["metadata"]["labels"]
    policies = _policies(docs, namespace)
    node_cluster.apply(*policies)
    ip = _head(node_cluster, namespace, head_labels)

    assert _reaches_once_programmed(node_cluster, namespace, "submitter", submitter, ip, 8265)
    # Only the dashboard: the client port stays the named clients'.
    assert not _reaches(node_cluster, namespace, "submitter-client", submitter, ip, 10001)
    # A pod of the namespace that is not the release's is refused...
    assert not _reaches(node_cluster, namespace, "outsider", {"app": "other"}, ip, 8265)
    # ...and with the policies gone it connects: the refusal above was the policy's.
    node_cluster.kubectl("-n", namespace, "delete", "networkpolicy", "--all")
    assert _reaches_once_programmed(
        node_cluster, namespace, "outsider-open", {"app": "other"}, ip, 8265
    )

    # Without the submitter's rule (the chart before it), KubeRay's submitter is refused too.
    node_cluster.apply(*[_without_submitter(p) for p in policies])
    assert not _reaches(node_cluster, namespace, "submitter-unruled", submitter, ip, 8265)


def _without_submitter(policy: dict) -> dict:
    policy = copy.deepcopy(policy)
    rules = policy["spec"].get("ingress", [])
    policy["spec"]["ingress"] = [r for r in rules if "ray-job-submitter" not in json.dumps(r)]
    return policy
