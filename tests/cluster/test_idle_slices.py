"""Why a standing release does not release its idle slices: Ray 2.60's autoscaler v1 and
KubeRay 1.6.2 together, in the test control plane (docs/jobs.md, "Idle slices").

The release is installed as it is, then given KubeRay's in-tree autoscaling (its docs' way:
enableInTreeAutoscaling, minReplicas 0). No autoscaler process runs here (no container does):
the test makes one autoscaler update at a time with Ray's own KubeRay node provider, the code
the sidecar runs, its Kubernetes client pointed at this API server. KubeRay is the real
operator. What it shows: when the autoscaler takes back one idle host of a multi-host slice
(its hosts' idle timers expire in different updates), it lists the host for deletion without
lowering replicas (it counts replicas in hosts), KubeRay deletes the whole slice (a replica
group is deleted together) and then makes it again. Only all hosts at once reach zero.
"""

from __future__ import annotations

import json

import pykube
import pytest
from ray.autoscaler._private.kuberay import node_provider as kuberay_provider
from ray.autoscaler._private.kuberay.autoscaling_config import _generate_provider_config

from harness.kube import Release, wait_for
from harness.paths import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

V6E_16 = REPO / "values" / "v6e-16.yaml"
WORKER = {"ray.io/node-type": "worker"}
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
