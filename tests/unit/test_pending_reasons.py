"""Why a release's job is not running, read from objects as the API server returns them: the
scheduler's PodScheduled condition, the cluster autoscaler's events (kubernetes/autoscaler FAQ:
NotTriggerScaleUp, FailedScaleUp, TriggeredScaleUp), container statuses, Kueue's Workload.
The same reading against the real scheduler, KubeRay and Kueue:
tests/cluster/test_pending_reasons.py."""

from __future__ import annotations

import pytest

from launcher.client.jobs.pending_reasons import kueue_reasons, pod_reasons

pytestmark = pytest.mark.unit
SHAPE = {
    "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
    "cloud.google.com/gke-tpu-topology": "4x4",
}


def _worker(name: str, phase: str, replica: str = "0", **status) -> dict:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "ray.io/node-type": "worker",
                "ray.io/group": "tpu-group",
                "ray.io/worker-group-replica-index": replica,
            },
        },
        "spec": {"nodeSelector": SHAPE},
        "status": {"phase": phase, **status},
    }


def _unschedulable(message: str) -> dict:
    return {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
            }
        ]
    }


def test_pods_no_node_can_take_are_named_once_per_cause_with_the_shape():
    no_shape = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    pods = [_worker(f"w-{i}", "Pending", **_unschedulable(no_shape)) for i in range(4)]
    (reason,) = pod_reasons(pods, [])
    assert reason.what == (
        "no node has this TPU shape (cloud.google.com/gke-tpu-accelerator=tpu-v6e-slice, "
        "cloud.google.com/gke-tpu-topology=4x4) for 4 pod(s): w-0, w-1, w-2, w-3"
    )
    assert "gke plan" in reason.fix


def test_a_slice_partly_up_and_the_autoscalers_last_word():
    full = "0/5 nodes are available: 2 Insufficient google.com/tpu, 3 node(s) didn't match."
    pods = [_worker("w-0", "Running"), _worker("w-1", "Running")] + [
        _worker(f"w-{i}", "Pending", **_unschedulable(full)) for i in (2, 3)
    ]
    events = [
        {"involvedObject": {"name": "w-2"}, "reason": "TriggeredScaleUp", "message": "up",
         "lastTimestamp": "2026-11-26T03:00:00Z"},
        {"involvedObject": {"name": "w-2"}, "reason": "NotTriggerScaleUp",
         "message": "pod didn't trigger scale-up: 1 max node group size reached",
         "lastTimestamp": "2026-11-26T03:05:00Z"},
        {"involvedObject": {"name": "w-3"}, "reason": "TriggeredScaleUp", "message": "up",
         "lastTimestamp": "2026-11-26T03:06:00Z"},  # still scaling up for this one: no reason
    ]  # fmt: skip
    taken, autoscaler, partial = pod_reasons(pods, events)
    assert taken.what.startswith("the nodes of this TPU shape") and "2 pod(s) wait" in taken.what
    assert autoscaler.what == (
        "the node autoscaler did not add nodes for w-2: NotTriggerScaleUp: pod didn't trigger "
        "scale-up: 1 max node group size reached"
    )
    assert partial.what.startswith("slice 0 of worker group tpu-group is partly up: 2 of 4")


def test_an_image_that_cannot_be_pulled_names_the_image_and_the_fix():
    waiting = {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x:1"'}
    pod = _worker("w-0", "Pending")
    pod["status"]["containerStatuses"] = [{"image": "x:1", "state": {"waiting": waiting}}]
    (reason,) = pod_reasons([pod], [])
    assert reason.what == 'pod w-0 cannot pull image x:1: Back-off pulling image "x:1"'
    assert "roles/artifactregistry.reader" in reason.fix


def test_a_workload_kueue_holds_back_says_what_kueue_said():
    held = {
        "metadata": {"name": "rayjob-tpu-ray-1", "namespace": "ml"},
        "spec": {"queueName": "team-a"},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False",
                   "reason": "Inadmissible", "message": "LocalQueue team-a doesn't exist"}]},
    }  # fmt: skip
    admitted = {**held, "status": {"conditions": [{"type": "Admitted", "status": "True"}]}}
    (reason,) = kueue_reasons([held, admitted])
    assert reason.what == (
        "Kueue has not admitted workload rayjob-tpu-ray-1 from queue team-a: LocalQueue team-a "
        "doesn't exist"
    )
    assert "kubectl get workloads -n ml" in reason.fix
