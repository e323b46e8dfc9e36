"""ray.worker.tpu.releaseIdleAfterSeconds as rendered: a standing release that starts with no
slice, whose jobs ask for slices and whose idle check gives them back (the loop itself runs
against the real KubeRay in tests/cluster/test_idle_slices.py)."""

from __future__ import annotations

import pytest

from harness.helm import by_kind, render
from harness.paths import REPO
from launcher.core.release_facts import IdleRelease, ReleaseFacts
from launcher.core.runtime_door import JOB_ENTRYPOINT
from launcher.core.tpu.slices import worker_group_slices

pytestmark = pytest.mark.chart

IDLE = ("--set", "ray.worker.tpu.releaseIdleAfterSeconds=1800")


def docs(*sets: str) -> list[dict]:
    return render(REPO / "values" / "v6e-16-x2.yaml", *sets)


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def test_the_release_starts_with_no_slice_and_offers_every_one():
    rendered = docs(*IDLE)
    (cluster,) = by_kind(rendered, "RayCluster")
    spec = cluster["spec"]
    (group,) = spec["workerGroupSpecs"]
    # No replicas rendered: jobs and the idle check own the count (KubeRay's default is 0).
    assert "replicas" not in group and group["minReplicas"] == 0 and group["maxReplicas"] == 2
    # submit reads the release's slices, a job on the head the env: both say two v6e-16.
    ((from_spec, _),) = worker_group_slices(spec)
    head = spec["headGroupSpec"]["template"]["spec"]
    ray_head, sidecar = head["containers"]
    facts = ReleaseFacts.from_env(env_of(ray_head))
    offered = facts.offered_slices
    assert offered == from_spec and (offered.shape.name, offered.num_slices) == ("v6e-16", 2)
    idle = IdleRelease(cluster["metadata"]["name"], group["groupName"], 1800.0)
    assert facts.idle_release == idle
    assert ReleaseFacts.from_env(env_of(sidecar)) == facts
    assert sidecar["name"] == "idle-release"
    assert sidecar["command"] == [*JOB_ENTRYPOINT, "idle-release"]
    token = next(e for e in sidecar["env"] if e["name"] == "RAY_AUTH_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": cluster["metadata"]["name"],
                                                  "key": "auth_token"}  # fmt: skip
    # The head reaches the API with its token; the workers never do.
    assert head["automountServiceAccountToken"] is True
    assert group["template"]["spec"]["automountServiceAccountToken"] is False
    # Its account may get and patch this RayCluster, nothing else.
    (role,) = [r for r in by_kind(rendered, "Role") if r["metadata"]["name"].endswith("-slices")]
    assert role["rules"] == [{"apiGroups": ["ray.io"], "resources": ["rayclusters"],
                              "resourceNames": [cluster["metadata"]["name"]],
                              "verbs": ["get", "patch"]}]  # fmt: skip
    (binding,) = [
        b for b in by_kind(rendered, "RoleBinding") if b["metadata"]["name"].endswith("-slices")
    ]
    assert binding["subjects"][0]["name"] == head["serviceAccountName"]
    # helm test waits for the head only: the slices come with a job.
    (test,) = [p for p in by_kind(rendered, "Pod") if p["metadata"]["name"].endswith("-test")]
    assert "--expect-nodes=1" in test["spec"]["containers"][0]["command"]


def test_without_it_nothing_reaches_the_api_and_every_slice_stays():
    rendered = docs()
    (cluster,) = by_kind(rendered, "RayCluster")
    (group,) = cluster["spec"]["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 2
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    assert head["automountServiceAccountToken"] is False and len(head["containers"]) == 1
    assert not [r for r in by_kind(rendered, "Role") if r["metadata"]["name"].endswith("-slices")]
    env = env_of(head["containers"][0])
    facts = ReleaseFacts.from_env(env)
    assert facts.known and facts.idle_release is None and facts.offered_slices is None
