"""Helm releases in a Kubernetes cluster (the test control plane or another), for the cluster
tests: install/upgrade with the pinned helm, fake GKE node pools for the values files, reads."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pykube
import pytest

from ci.cluster import control_plane, gke_nodes
from harness.helm import BUCKET, CHART, helm
from launcher.runtime.cluster.kube_api import KubeApi

# How long the control plane may take to settle a release's objects (schedule its pods, delete
# its namespace) on a machine the e2e tier keeps busy.
SETTLE_S = 240


def wait_for(
    what: str,
    check: Callable[[], object],
    timeout: float = 60,
    explain: Callable[[], str] = lambda: "",
) -> object:
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
        proc = subprocess.run(
            [
                str(helm(major)),
                "--kubeconfig",
                self.kubeconfig,
                "--namespace",
                self.namespace,
                *args,
            ],
            text=True,
            capture_output=True,
        )
        if check:
            assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc

    def values_args(self, *values: Path) -> list[str]:
        return [a for v in values for a in ("-f", str(v))] + BUCKET

    def install(self, *values: Path, major: int = 3) -> subprocess.CompletedProcess:
        return self.helm("install", self.name, str(CHART), *self.values_args(*values), major=major)

    def upgrade(self, *values: Path) -> subprocess.CompletedProcess:
        return self.helm("upgrade", self.name, str(CHART), *self.values_args(*values))

    def add_nodes_for(self, *values: Path) -> list[dict]:
        suffix = "-" + self.namespace.rsplit("-", 1)[1]  # unique per test
        nodes = gke_nodes.nodes_for(gke_nodes.merged_values(*values), suffix)
        for node in nodes:
            pykube.Node(self.api, node).create()
            self.nodes.append(node["metadata"]["name"])
        return nodes

    def pod_security(self, level: str) -> None:
        """Sets the level Pod Security Admission enforces in the release's namespace."""
        ns = pykube.Namespace.objects(self.api).get(name=self.namespace)
        for mode in ("enforce", "warn"):
            ns.labels[f"pod-security.kubernetes.io/{mode}"] = level
        ns.update()

    def kubectl(self) -> list[str]:
        """The pinned kubectl, pointed at this cluster."""
        kubectl_dir = control_plane.build()["kubernetes"]
        return [str(kubectl_dir / "kubectl"), "--kubeconfig", self.kubeconfig]

    def kubectl_env(self) -> dict[str, str]:
        """Environment for a launcher command that runs kubectl against this cluster."""
        kubectl_dir = control_plane.build()["kubernetes"]
        return {
            **os.environ,
            "KUBECONFIG": self.kubeconfig,
            "PATH": f"{kubectl_dir}{os.pathsep}{os.environ['PATH']}",
        }

    def as_account(self, account: str) -> KubeApi:
        """The API as a pod running as `account` reaches it: its own token, this cluster's CA."""
        token = subprocess.run(
            [*self.kubectl(), "create", "token", account, "-n", self.namespace],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        config = pykube.KubeConfig.from_file(self.kubeconfig)
        ca = config.cluster["certificate-authority"].filename()
        return KubeApi(config.cluster["server"], token, ca, self.namespace)

    def pods(self, **selector: str) -> list[pykube.Pod]:
        return list(
            pykube.Pod.objects(self.api).filter(namespace=self.namespace, selector=selector or None)
        )

    def raycluster(self) -> dict:
        clusters = list(ray_clusters(self.api).objects(self.api).filter(namespace=self.namespace))
        assert len(clusters) == 1, [c.name for c in clusters]
        return clusters[0].obj

    def events(self) -> str:
        events = pykube.Event.objects(self.api).filter(namespace=self.namespace)
        return "\n".join(
            f"{e.obj['involvedObject']['name']}: {e.obj.get('reason')} {e.obj.get('message')}"
            for e in events
        )


def ready(rc: dict) -> bool:
    """KubeRay's verdict on a RayCluster: state ready (or, newer, RayClusterProvisioned)."""
    status = rc.get("status", {})
    conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
    return status.get("state") == "ready" or conditions.get("RayClusterProvisioned") == "True"


def ray_clusters(api: pykube.HTTPClient) -> type[pykube.objects.NamespacedAPIObject]:
    return pykube.object_factory(api, "ray.io/v1", "RayCluster")


def dump(obj: object) -> str:
    return json.dumps(obj, indent=1, default=str)[:4000]


def logging_wrapper(real: str, wrapper: Path, log: Path, prefix: str = "") -> Path:
    """An executable at `wrapper` that appends each call's arguments (after `prefix`) to `log`,
    then runs `real` with them: what a command ran, counted against the real tool."""
    wrapper.write_text(
        f'#!/bin/sh\nprintf "{prefix}%s\\n" "$*" >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper
