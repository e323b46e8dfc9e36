"""`status --release` of a serving release: its stage from the objects Kubernetes and KubeRay keep
(pod phases and Ready conditions; a RayService's application statuses and Ready condition, in
KubeRay's v1 status shape: apis/ray/v1/rayservice_types.go)."""

from __future__ import annotations

import pytest

from launcher.client.serve import status as serving_status

pytestmark = pytest.mark.unit


def pod(name: str, component: str, phase: str = "Running", ready: bool = False, why: str = ""):
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if phase == "Pending":
        conditions = [{"type": "PodScheduled", "status": "False", "message": why}]
    return {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/component": component}},
        "status": {"phase": phase, "conditions": conditions},
    }


def items(objects: dict[str, list[dict]]):
    def get_items(namespace, kind, *args, optional=False, dry_run=False):
        return objects.get(kind, [])

    return get_items


def rayservice(app_status: str | None, ready: str = "False") -> dict:
    status: dict = {"conditions": [{"type": "Ready", "status": ready, "message": ""}]}
    if app_status:
        status["activeServiceStatus"] = {
            "applicationStatuses": {"llm": {"status": app_status, "message": ""}}
        }
    return {"kind": "RayService", "metadata": {"name": "serve-vllm"}, "status": status}


def test_a_release_without_a_server_is_not_a_serving_one():
    assert serving_status.read("tpu", "default", items({})) is None


def test_a_slice_without_nodes_is_pending_with_the_schedulers_reason():
    why = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    state = serving_status.read(
        "serve",
        "default",
        items(
            {
                "rayservice": [rayservice(None)],
                "pods": [pod("head", "vllm"), pod("h0", "vllm-worker", "Pending", why=why)],
            }
        ),
    )
    assert state.stage == "pending"
    assert f"h0 Pending: {why}" in "\n".join(state.lines())


def test_a_rayservice_is_ready_when_its_application_runs_and_kuberay_says_ready():
    pods = [pod("head", "vllm", ready=True), *(pod(f"h{i}", "vllm-worker") for i in range(4))]
    deploying = items({"rayservice": [rayservice("DEPLOYING")], "pods": pods})
    assert serving_status.read("serve", "default", deploying).stage == "starting"
    running = items({"rayservice": [rayservice("RUNNING", "True")], "pods": pods})
    state = serving_status.read("serve", "default", running)
    assert state.stage == "ready"
    assert "tpu-launcher generate --release serve" in state.lines()[-1]
    failed = items({"rayservice": [rayservice("DEPLOY_FAILED")], "pods": pods})
    assert serving_status.read("serve", "default", failed).stage == "failed"


def test_a_deployment_is_ready_when_its_server_pods_are():
    server = {"kind": "Deployment", "metadata": {"name": "serve-vllm"}}
    loading = items({"deployment": [server], "pods": [pod("p", "vllm")]})
    assert serving_status.read("serve", "default", loading).stage == "starting"
    ready = items({"deployment": [server], "pods": [pod("p", "vllm", ready=True)]})
    assert serving_status.read("serve", "default", ready).as_json()["stage"] == "ready"
