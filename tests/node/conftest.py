"""The node tier: the chart's pods on a real node (ci/node/node.py): containerd and runc, a
kubelet of the pinned Kubernetes joined to a control plane of the tier's own with the real KubeRay
operator, pods on a CNI bridge, kube-proxy, CoreDNS, and the NetworkPolicies enforced (kube-
router's firewall). Root only: a machine where it cannot run fails the tier with the reason."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.paths import REPO

NODE = REPO / "ci" / "node" / "node.py"


def _node(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(NODE), *args], cwd=REPO, text=True, capture_output=True
    )


@dataclass(frozen=True)
class NodeCluster:
    kubeconfig: Path
    kubectl_bin: Path
    images: dict[str, str]

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            [str(self.kubectl_bin), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            text=True,
            capture_output=True,
        )
        if check:
            assert proc.returncode == 0, f"kubectl {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc.stdout

    def apply(self, *objects: dict) -> None:
        self.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))

    def get(self, kind: str, name: str, namespace: str) -> dict | None:
        out = subprocess.run(
            [
                str(self.kubectl_bin),
                "--kubeconfig",
                str(self.kubeconfig),
                "-n",
                namespace,
                "get",
                kind,
                name,
                "-o",
                "json",
            ],
            text=True,
            capture_output=True,
        )
        return json.loads(out.stdout) if out.returncode == 0 else None

    def wait(self, what: str, check, timeout: float = 120, explain=lambda: "") -> object:
        deadline = time.monotonic() + timeout
        while not (result := check()):
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{explain()}")
            time.sleep(0.5)
        return result


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[NodeCluster]:
    running = _node("status").returncode == 0
    if not running:
        up = _node("up")
        assert up.returncode == 0, f"the node tier's node did not come up:\n{up.stdout}{up.stderr}"
    run = REPO / ".tools" / "node" / "run"
    kubeconfig = Path(_node("status").stdout.strip())
    kubectl = next((REPO / ".tools" / "cluster").glob("kubernetes-*/kubectl"))
    yield NodeCluster(kubeconfig, kubectl, json.loads((run / "images.json").read_text()))
    if not running:
        _node("down")


@pytest.fixture
def namespace(node_cluster: NodeCluster) -> Iterator[str]:
    """A namespace of its own where Pod Security Admission enforces `restricted`, as a platform
    team's shared cluster would."""
    name = f"node-{uuid.uuid4().hex[:6]}"
    labels = {f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "warn")}
    node_cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
    )
    yield name
    node_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
