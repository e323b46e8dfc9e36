"""Idle slices in the test control plane, with the real KubeRay operator (docs/jobs.md, "Idle
slices").

1. Why Ray's own autoscaler is not used: Ray 2.60's autoscaler v1 and KubeRay 1.6.2 together.
   The release is given KubeRay's in-tree autoscaling (its docs' way: enableInTreeAutoscaling,
   minReplicas 0), and the test makes one autoscaler update at a time with Ray's own KubeRay
   node provider, the code the sidecar runs, its client pointed at this API server (no
   container runs here). When it takes back one idle host of a multi-host slice (its hosts'
   idle timers expire in different updates), it lists the host for deletion without lowering
   replicas (it counts replicas in hosts); KubeRay deletes the whole slice, then makes it again.
2. What the chart does instead (ray.worker.tpu.releaseIdleAfterSeconds): the release starts
   with no slice, a job's driver asks for its slices and KubeRay makes whole ones, the idle
   check gives them all back, each with the head's own token and the Role the chart grants it.
"""

from __future__ import annotations

import json
import time
import urllib.error

import pykube
import pytest
from ray.autoscaler._private.kuberay import node_provider as kuberay_provider
from ray.autoscaler._private.kuberay.autoscaling_config import _generate_provider_config

from harness.helm import CHART
from harness.kube import Release, wait_for
from harness.paths import REPO
from launcher.core.release_facts import IdleRelease, ReleaseFacts
from launcher.runtime.cluster.idle_release import ask_for, watch

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

V6E_16 = REPO / "values" / "v6e-16.yaml"
WORKER = {"ray.io/node-type": "worker"}
HEAD = {"ray.io/node-type": "head"}
REPLICA = "ray.io/worker-group-replica-name"  # KubeRay's label of a slice's hosts
SETTLE_S = 90


class ControlPlaneApi(kuberay_provider.IKubernetesHttpApiClient):
    """Ray's KubeRay client interface over this API server (the sidecar's own client reads the
    pod's service-account files, which a test process has not)."""

    def __init__(self, api: pykube.HTTPClient, namespace: str):
        self.api, self.namespace = api, namespace

    def _where(self, path: str) -> dict:
        ray = path.startswith("rayclusters")
        return {
            "url": path,
            "namespace": self.namespace,
            "base": "/apis" if ray else "/api",
            "version": "ray.io/v1" if ray else "v1",
        }

    def get(self, path: str) -> dict:
        reply = self.api.get(**self._where(path))
        reply.raise_for_status()
        return reply.json()

    def patch(self, path: str, payload: list[dict], content_type: str = "") -> dict:
        reply = self.api.patch(
            **self._where(path),
            data=json.dumps(payload),
            headers={"Content-Type": content_type or "application/json-patch+json"},
        )
        reply.raise_for_status()
        return reply.json()

    def delete(self, path: str) -> dict:
        raise AssertionError(f"the autoscaler deletes nothing itself: {path}")


def running_workers(release: Release) -> dict[str, str]:
    """Running worker pod -> its slice (replica group)."""
    return {
        p.name: p.obj["metadata"]["labels"].get(REPLICA, "")
        for p in release.pods(**WORKER)
        if p.obj["status"].get("phase") == "Running"
        and "deletionTimestamp" not in p.obj["metadata"]
    }


def autoscaler_update(release: Release, provider, idle: list[str]) -> list[list[dict]]:
    """One update of Ray's v1 autoscaler that finds `idle` hosts past their idle timeout:
    read the cluster, terminate them, submit the scale request. Returns the patches sent."""
    sent: list[list[dict]] = []
    submit = provider._submit_raycluster_patch
    provider._submit_raycluster_patch = lambda payload: (sent.append(payload), submit(payload))
    provider.non_terminated_nodes({})
    provider.terminate_nodes(idle)
    provider.post_process()
    return sent


def test_an_idle_slice_taken_back_one_host_at_a_time_is_made_again(release: Release, monkeypatch):
    release.add_nodes_for(V6E_16)
    release.install(V6E_16)
    wait_for("one slice of 4 hosts running", lambda: len(running_workers(release)) == 4,
             SETTLE_S, release.events)  # fmt: skip
    name = release.raycluster()["metadata"]["name"]
    patch = [
        {"op": "add", "path": "/spec/enableInTreeAutoscaling", "value": True},
        {"op": "add", "path": "/spec/autoscalerOptions", "value": {"version": "v1"}},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/minReplicas", "value": 0},
    ]
    api = ControlPlaneApi(release.api, release.namespace)
    api.patch(f"rayclusters/{name}", patch)
    monkeypatch.setattr(kuberay_provider, "KubernetesHttpApiClient", lambda namespace: api)
    # The provider config the sidecar's own config producer gives it.
    config = _generate_provider_config(release.namespace)
    provider = kuberay_provider.KubeRayNodeProvider(config, name)
    before = running_workers(release)
    (slice_before,) = set(before.values())

    # One host's idle timer expires first: the whole slice is deleted, and made again.
    first = sorted(before)[0]
    (sent,) = autoscaler_update(release, provider, [first])
    assert sent == [{"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
                     "value": {"workersToDelete": [first]}}], sent  # fmt: skip
    assert release.raycluster()["spec"]["workerGroupSpecs"][0]["replicas"] == 1

    def new_slice() -> dict[str, str] | None:
        workers = running_workers(release)
        return workers if len(workers) == 4 and not set(workers) & set(before) else None

    remade = wait_for(
        "KubeRay to delete the slice and make a new one", new_slice, SETTLE_S, release.events
    )
    assert isinstance(remade, dict)
    (slice_after,) = set(remade.values())
    assert slice_after and slice_after != slice_before, (remade, slice_before)

    # All hosts past the timeout in one update: replicas 0, and the slice is gone.
    (sent,) = autoscaler_update(release, provider, sorted(remade))
    assert {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0} in sent
    wait_for("no worker pod left", lambda: not release.pods(**WORKER), SETTLE_S, release.events)
    assert release.raycluster()["spec"]["workerGroupSpecs"][0]["replicas"] == 0


def test_a_job_asks_for_whole_slices_and_the_idle_check_gives_them_all_back(release: Release):
    release.add_nodes_for(V6E_16)
    release.helm("install", release.name, str(CHART), *release.values_args(V6E_16),
                 "--set", "ray.worker.tpu.releaseIdleAfterSeconds=600")  # fmt: skip
    cluster = release.raycluster()
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in head["containers"][0]["env"] if "value" in e}
    idle = ReleaseFacts.from_env(env).idle_release
    assert idle == IdleRelease(cluster["metadata"]["name"], "tpu-group", 600.0)
    wait_for("the head running", lambda: release.pods(**HEAD), SETTLE_S, release.events)
    time.sleep(5)  # KubeRay has reconciled the workers by now: none
    assert not release.pods(**WORKER)
    api = release.as_account(head["serviceAccountName"])

    # A job's driver asks for its slice (entrypoint._ask_for_slices): a whole slice comes.
    assert ask_for(api, idle, 1) == 0
    assert ask_for(api, idle, 1) is None  # asked already
    wait_for("one slice of 4 hosts running", lambda: len(running_workers(release)) == 4,
             SETTLE_S, release.events)  # fmt: skip
    assert len(set(running_workers(release).values())) == 1

    # No job for the quiet period: the idle check gives the slice back, every host at once.
    now = [0.0]

    def clock() -> float:
        now[0] += idle.after_s
        return now[0]

    watch(api, idle, active=lambda: False, clock=clock, sleep=lambda _: None, rounds=2)
    wait_for("no worker pod left", lambda: not release.pods(**WORKER), SETTLE_S, release.events)
    time.sleep(10)  # and none made again
    assert not release.pods(**WORKER), [p.name for p in release.pods(**WORKER)]
    assert release.raycluster()["spec"]["workerGroupSpecs"][0]["replicas"] == 0

    # The head's token reaches that RayCluster and nothing else.
    with pytest.raises(urllib.error.HTTPError, match="403"):
        api.pods("ray.io/node-type=worker")
