"""`tpu-launcher status --release` says why a release's job is not running, from the objects the
real scheduler, KubeRay and Kueue write in the test control plane: a slice with no node of its
TPU shape, the node autoscaler refusing to add one, a slice partly up with its nodes full, and
a RayJob that Kueue does not admit. GKE's cluster autoscaler does not run here: its events are
written as it writes them (kubernetes/autoscaler FAQ), named as such below."""

from __future__ import annotations

import json
import subprocess
import sys

import pykube
import pytest

from ci.cluster import gke_nodes
from harness.helm import CHART
from harness.kube import Release, wait_for
from harness.paths import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

V6E_16 = REPO / "values" / "v6e-16.yaml"
WORKER = {"ray.io/node-type": "worker"}
SETTLE_S = 90  # KubeRay's pods and the scheduler's verdict on them, on a busy machine


def status(release: Release, *extra: str) -> subprocess.CompletedProcess:
    """`status --release`, with no job submitted from here (no container runs here, so no Ray
    answers on the head: the release's own state is the answer)."""
    env = {**release.kubectl_env(), "LAUNCHER_STATE_DIR": f"/tmp/{release.namespace}-state"}
    return subprocess.run(
        [sys.executable, "-m", "launcher", "status", "--release", release.name,
         "--namespace", release.namespace, *extra],
        text=True, capture_output=True, env=env, cwd=REPO,
    )  # fmt: skip


def add_nodes(release: Release, nodes: list[dict]) -> None:
    for node in nodes:
        pykube.Node(release.api, node).create()
        release.nodes.append(node["metadata"]["name"])


def pending_workers(release: Release) -> list[pykube.Pod]:
    return [p for p in release.pods(**WORKER) if p.obj["status"].get("phase") == "Pending"]


def unschedulable(pod: pykube.Pod) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in pod.obj["status"].get("conditions", [])
    )


def test_a_slice_without_nodes_then_partly_up_says_why_at_each_stage(release: Release):
    suffix = "-" + release.namespace.rsplit("-", 1)[1]
    nodes = gke_nodes.nodes_for(gke_nodes.merged_values(V6E_16), suffix)
    tpu = [n for n in nodes if "cloud.google.com/gke-tpu-accelerator" in n["metadata"]["labels"]]
    add_nodes(release, [n for n in nodes if n not in tpu])  # the CPU pool: the head runs
    release.install(V6E_16)
    wait_for(
        "4 worker pods the scheduler finds no node for",
        lambda: len([p for p in pending_workers(release) if unschedulable(p)]) == 4,
        SETTLE_S,
        release.events,
    )
    # 1. No node of the slice's shape.
    shown = status(release)
    assert shown.returncode == 0, shown.stderr
    assert "why it is not running:" in shown.stdout, shown.stdout
    assert (
        "no node has this TPU shape (cloud.google.com/gke-tpu-accelerator=tpu-v6e-slice, "
        "cloud.google.com/gke-tpu-topology=4x4) for 4 pod(s)"
    ) in shown.stdout, shown.stdout

    # 2. The node autoscaler's refusal (GKE's cluster autoscaler, not running here: its event,
    # as it writes one on a pod it did not scale up for).
    pod = pending_workers(release)[0]
    pykube.Event(release.api, {
        "metadata": {"name": f"{pod.name}.ca", "namespace": release.namespace},
        "involvedObject": {"kind": "Pod", "name": pod.name, "namespace": release.namespace,
                           "uid": pod.obj["metadata"]["uid"]},
        "reason": "NotTriggerScaleUp",
        "message": "pod didn't trigger scale-up: 1 max node group size reached",
        "source": {"component": "cluster-autoscaler"},
        "type": "Normal",
        "lastTimestamp": "2026-11-26T03:00:00Z",
    }).create()  # fmt: skip
    shown = status(release, "--json")
    pending = [p["reason"] for p in json.loads(shown.stdout)["pending"]]
    assert (
        f"the node autoscaler did not add nodes for {pod.name}: NotTriggerScaleUp: pod didn't "
        "trigger scale-up: 1 max node group size reached"
    ) in pending, pending

    # 3. Half the slice's nodes: two hosts run, two wait for nodes of the same shape, all taken.
    add_nodes(release, tpu[:2])
    wait_for(
        "2 workers running and 2 still pending",
        lambda: len(pending_workers(release)) == 2 and len(release.pods(**WORKER)) == 4,
        SETTLE_S,
        release.events,
    )
    wait_for(
        "the scheduler to try the new nodes",
        lambda: "taken" in status(release).stdout,
        60,
        lambda: status(release).stdout + release.events(),
    )
    shown = status(release).stdout
    assert "the nodes of this TPU shape" in shown and "are all taken: 2 pod(s) wait" in shown, shown
    assert "is partly up: 2 of 4 hosts running" in shown, shown


def test_a_job_kueue_does_not_admit_says_what_kueue_said(release: Release):
    release.add_nodes_for(V6E_16)
    queue = f"absent-{release.namespace.rsplit('-', 1)[1]}"
    release.helm(
        "install", release.name, str(CHART), *release.values_args(V6E_16),
        "--set", "ray.job.enabled=true", "--set", "ray.job.args={base.yml,run_name=r}",
        "--set", f"kueue.queueName={queue}",
    )  # fmt: skip
    wait_for(
        "Kueue's verdict on the RayJob's workload",
        lambda: "Kueue has not admitted workload" in status(release).stdout,
        SETTLE_S,
        release.events,
    )
    shown = status(release)
    assert shown.returncode == 0, shown.stderr
    assert "suspended, waiting for Kueue's queue" in shown.stdout, shown.stdout
    assert f"from queue {queue}: LocalQueue {queue} doesn't exist" in shown.stdout, shown.stdout
    assert f"kubectl get workloads -n {release.namespace}" in shown.stdout
