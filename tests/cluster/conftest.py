"""The chart installed into a real control plane (ci/cluster/control_plane.py): real API server,
scheduler, controller manager, KubeRay operator and JobSet controller; nodes are kwok fakes shaped
like GKE's TPU node pools (ci/cluster/gke_nodes.py). No container runs: kwok marks scheduled pods
Running and Ready (and Job pods Succeeded), so what needs a live process is not checked here.

pytest-helm-charts' `kube_cluster` fixture connects to the cluster through `kube_config`, which
this conftest points at the control plane it brings up (or one already up: `make cluster-up`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pykube
import pytest

from ci.cluster import control_plane, gke_nodes
from tests.chart.helm import BUCKET, CHART, helm
from tests.conftest import REPO


def _control_plane(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "ci" / "cluster" / "control_plane.py"),
                           *args], cwd=REPO, text=True, capture_output=True)


@pytest.fixture(scope="session")
def control_plane_kubeconfig(pytestconfig) -> Iterator[Path]:
    """The control plane's kubeconfig; `--kubeconfig PATH` (pytest-helm-charts' option) uses
    another cluster instead, such as kind with KubeRay and JobSet installed (see the README)."""
    if given := pytestconfig.getoption("kubeconfig"):
        yield Path(given)
        return
    running = _control_plane("status").returncode == 0
    if not running:
        up = _control_plane("up")
        assert up.returncode == 0, f"the control plane did not come up:\n{up.stdout}{up.stderr}"
    else:  # fake nodes left by `make cluster-nodes` or a killed run would take the tests' pods
        api = pykube.HTTPClient(pykube.KubeConfig.from_file(str(control_plane.KUBECONFIG)))
        for node in pykube.Node.objects(api).filter(selector={"type": "kwok"}):
            node.delete()
    yield control_plane.KUBECONFIG
    if not running:
        _control_plane("down")


@pytest.fixture(scope="module")
def kube_config(control_plane_kubeconfig: Path) -> str:
    """Overrides pytest-helm-charts' option-driven fixture: its kube_cluster uses this one."""
    return str(control_plane_kubeconfig)


def wait_for(what: str, check: Callable[[], object], timeout: float = 60,
             explain: Callable[[], str] = lambda: "") -> object:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{explain()}")
        time.sleep(0.25)


@dataclass
class Release:
    """One helm release in its own namespace, on fake GKE nodes made for its values files."""

    api: pykube.HTTPClient
    kubeconfig: str
    namespace: str
    name: str = "tpu"
    nodes: list[str] = field(default_factory=list)

    def helm(self, *args: str, check: bool = True, major: int = 3) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(helm(major)), "--kubeconfig", self.kubeconfig,
                               "--namespace", self.namespace, *args],
                              text=True, capture_output=True)
        if check:
            assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc

    def values_args(self, *values: Path) -> list[str]:
        return [a for v in values for a in ("-f", str(v))] + BUCKET

    def install(self, *values: Path, major: int = 3) -> subprocess.CompletedProcess:
        return self.helm("install", self.name, str(CHART), *self.values_args(*values),
                         major=major)

    def upgrade(self, *values: Path) -> subprocess.CompletedProcess:
        return self.helm("upgrade", self.name, str(CHART), *self.values_args(*values))

    def add_nodes_for(self, *values: Path) -> list[dict]:
        suffix = "-" + self.namespace.rsplit("-", 1)[1]  # unique per test
        nodes = gke_nodes.nodes_for(gke_nodes.merged_values(*values), suffix)
        for node in nodes:
            pykube.Node(self.api, node).create()
            self.nodes.append(node["metadata"]["name"])
        return nodes

    def kubectl_env(self) -> dict[str, str]:
        """Environment for a launcher command that runs kubectl against this cluster."""
        kubectl_dir = control_plane.build()["kubernetes"]
        return {**os.environ, "KUBECONFIG": self.kubeconfig,
                "PATH": f"{kubectl_dir}{os.pathsep}{os.environ['PATH']}"}

    def pods(self, **selector: str) -> list[pykube.Pod]:
        return list(pykube.Pod.objects(self.api).filter(namespace=self.namespace,
                                                        selector=selector or None))

    def raycluster(self) -> dict:
        clusters = list(ray_clusters(self.api).objects(self.api).filter(namespace=self.namespace))
        assert len(clusters) == 1, [c.name for c in clusters]
        return clusters[0].obj

    def events(self) -> str:
        events = pykube.Event.objects(self.api).filter(namespace=self.namespace)
        return "\n".join(f"{e.obj['involvedObject']['name']}: {e.obj.get('reason')} "
                         f"{e.obj.get('message')}" for e in events)


def ready(rc: dict) -> bool:
    """KubeRay's verdict on a RayCluster: state ready (or, newer, RayClusterProvisioned)."""
    status = rc.get("status", {})
    conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
    return status.get("state") == "ready" or conditions.get("RayClusterProvisioned") == "True"


def ray_clusters(api: pykube.HTTPClient) -> type[pykube.objects.NamespacedAPIObject]:
    return pykube.object_factory(api, "ray.io/v1", "RayCluster")


@pytest.fixture
def release(kube_cluster) -> Iterator[Release]:
    api = kube_cluster.kube_client
    namespace = f"chart-{uuid.uuid4().hex[:6]}"
    pykube.Namespace(api, {"metadata": {"name": namespace}}).create()
    rel = Release(api, kube_cluster.kube_config_path, namespace)
    yield rel
    rel.helm("uninstall", rel.name, "--wait", check=False)
    pykube.Namespace.objects(api).get(name=namespace).delete()
    # Pods are removed by kwok on behalf of their node: keep the nodes until they are gone.
    wait_for(f"namespace {namespace} to be deleted",
             lambda: not pykube.Namespace.objects(api).get_or_none(name=namespace), 90)
    for name in rel.nodes:
        pykube.Node.objects(api).get(name=name).delete()


def dump(obj: object) -> str:
    return json.dumps(obj, indent=1, default=str)[:4000]
