"""The node tier: the chart's pods on a real node (ci/node/node.py): containerd and runc, a
kubelet of the pinned Kubernetes joined to a control plane of the tier's own with the real KubeRay
operator, pods on a CNI bridge, kube-proxy, CoreDNS, and the NetworkPolicies enforced (kube-
router's firewall). Root only: a machine where it cannot run fails the tier with the reason."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from harness.node import NodeCluster, build_launcher_image, launcher_image_name, node


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[NodeCluster]:
    running = node("status").returncode == 0
    if not running:
        up = node("up")
        assert up.returncode == 0, f"the node tier's node did not come up:\n{up.stdout}{up.stderr}"
    yield NodeCluster.running()
    if not running:
        node("down")


@pytest.fixture(scope="module")
def launcher_image(node_cluster: NodeCluster) -> str:
    """The launcher image built from its Dockerfile (once per content) and in the node."""
    built = build_launcher_image()
    assert built.returncode == 0, built.stdout + built.stderr
    print(built.stdout)
    return launcher_image_name()


@pytest.fixture(scope="module")
def user_env(node_cluster: NodeCluster, tmp_path_factory) -> dict[str, str]:
    return node_cluster.user_env(tmp_path_factory.mktemp("bin"), tmp_path_factory.mktemp("state"))


@pytest.fixture
def namespace(node_cluster: NodeCluster) -> Iterator[str]:
    """A namespace of its own where Pod Security Admission enforces `restricted`, as a platform
    team's shared cluster would."""
    name = f"node-{uuid.uuid4().hex[:6]}"
    node_cluster.namespace(name)
    yield name
    node_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
