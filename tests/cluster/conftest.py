"""The chart installed into a real control plane (ci/cluster/control_plane.py): real API server,
scheduler, controller manager, KubeRay operator and JobSet controller; nodes are kwok fakes shaped
like GKE's TPU node pools (ci/cluster/gke_nodes.py). No container runs: kwok marks scheduled pods
Running and Ready (and Job pods Succeeded), so what needs a live process is not checked here.

pytest-helm-charts' `kube_cluster` fixture connects to the cluster through `kube_config`, which
this conftest points at the control plane it brings up (or one already up: `make cluster-up`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pykube
import pytest

from ci.cluster import control_plane
from harness.helm import helm
from harness.kube import SETTLE_S, Release, wait_for
from harness.paths import REPO
from tests.support import fake_gcloud


def _control_plane(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "ci" / "cluster" / "control_plane.py"), *args],
        cwd=REPO,
        text=True,
        capture_output=True,
    )


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
    else:  # fake nodes left by a killed run (or a benchmark) would take the tests' pods
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


PSA_MODES = ("enforce", "warn")


@pytest.fixture
def release(kube_cluster) -> Iterator[Release]:
    api = kube_cluster.kube_client
    namespace = f"chart-{uuid.uuid4().hex[:6]}"
    # Every release goes where Pod Security Admission enforces `restricted`, as a platform
    # team's shared cluster would: a pod the chart makes that breaks it is never created.
    labels = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in PSA_MODES}
    pykube.Namespace(api, {"metadata": {"name": namespace, "labels": labels}}).create()
    rel = Release(api, kube_cluster.kube_config_path, namespace)
    yield rel
    # Cordoned first: the scheduler stops placing pods on them long before they are deleted (a
    # deleted node can linger in its cache, and a next test's pod land on it, on a busy machine).
    for name in rel.nodes:
        pykube.Node.objects(api).get(name=name).cordon()
    rel.helm("uninstall", rel.name, "--wait", check=False)
    pykube.Namespace.objects(api).get(name=namespace).delete()
    # Pods are removed by kwok on behalf of their node: keep the nodes until they are gone. On a
    # machine busy with the e2e tier the control plane's controllers can fall minutes behind
    # (CI at 66efd2b: four namespaces past 90 s at once, and two releases' pods unscheduled).
    wait_for(
        f"namespace {namespace} to be deleted",
        lambda: not pykube.Namespace.objects(api).get_or_none(name=namespace),
        SETTLE_S,
        explain=lambda: _left_in(rel),
    )
    for name in rel.nodes:
        pykube.Node.objects(api).get(name=name).delete()
    wait_for(
        "the release's nodes to be deleted",
        lambda: not any(pykube.Node.objects(api).get_or_none(name=n) for n in rel.nodes),
        60,
    )


def _left_in(release: Release) -> str:
    """What is still in a namespace that is being deleted, and why (its conditions)."""
    namespace = pykube.Namespace.objects(release.api).get_or_none(name=release.namespace)
    conditions = (namespace.obj.get("status") or {}).get("conditions", []) if namespace else []
    return "\n".join(f"{c.get('type')}: {c.get('message', '')}" for c in conditions)


@pytest.fixture
def gke(tmp_path: Path, release: Release) -> dict[str, str]:
    """The environment of a user whose gcloud talks to the FAKE Google Cloud, whose GKE
    cluster is the control plane, and who exported the tutorial's variables."""
    fake_gcloud.install(tmp_path / "bin", tmp_path / "gke-state.json", real_helm=helm(3))
    kubectl_dir = Path(release.kubectl()[0]).parent
    return {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{kubectl_dir}:{os.environ['PATH']}",
        "KUBECONFIG": str(tmp_path / "kubeconfig"),  # empty until get-credentials
        "FAKE_GKE_KUBECONFIG": release.kubeconfig,
        "PROJECT_ID": fake_gcloud.PROJECT,
        "CLUSTER_NAME": fake_gcloud.CLUSTER,
        "LOCATION": fake_gcloud.LOCATION,
        "BUCKET": fake_gcloud.BUCKET,
        "LAUNCHER_STATE_DIR": str(tmp_path / "state"),
    }
