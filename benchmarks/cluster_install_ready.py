#!/usr/bin/env python3
"""Time from `helm install` to a ready RayCluster on the test control plane's fake GKE TPU nodes
(target <= 30 s), per values file, a few rounds each; also the control plane's start-up.

    .venv/bin/python benchmarks/cluster_install_ready.py [rounds]

Uses a running control plane (`make cluster-up`) or starts and stops its own.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid

from ci.cluster import control_plane, gke_nodes
from harness.helm import BUCKET, CHART, helm
from harness.kube import ready as raycluster_ready
from harness.paths import REPO

VALUES = ["v6e-16.yaml", "v6e-16-x2.yaml", "cpu.yaml"]


def kubectl(bins, *args: str, stdin: str | None = None) -> str:
    return control_plane.kubectl(bins, *args, stdin=stdin)


def ready(bins, namespace: str) -> bool:
    out = json.loads(kubectl(bins, "-n", namespace, "get", "raycluster", "-o", "json"))["items"]
    return bool(out) and raycluster_ready(out[0])


def one_round(bins, values: str) -> float:
    suffix = uuid.uuid4().hex[:6]
    ns = f"bench-{suffix}"
    nodes = gke_nodes.nodes_for(gke_nodes.merged_values(REPO / "values" / values), f"-{suffix}")
    kubectl(bins, "create", "namespace", ns)
    kubectl(bins, "apply", "-f", "-", stdin="\n---\n".join(json.dumps(n) for n in nodes))
    started = time.monotonic()
    subprocess.run(
        [
            str(helm(3)),
            "--kubeconfig",
            str(control_plane.KUBECONFIG),
            "-n",
            ns,
            "install",
            "tpu",
            str(CHART),
            "-f",
            str(REPO / "values" / values),
            *BUCKET,
        ],
        check=True,
        capture_output=True,
    )
    while not ready(bins, ns):
        if time.monotonic() - started > 120:
            raise SystemExit(f"{values}: not ready after 120 s")
        time.sleep(0.1)
    elapsed = time.monotonic() - started
    subprocess.run(
        [
            str(helm(3)),
            "--kubeconfig",
            str(control_plane.KUBECONFIG),
            "-n",
            ns,
            "uninstall",
            "tpu",
            "--wait",
        ],
        check=True,
        capture_output=True,
    )
    kubectl(bins, "delete", "namespace", ns, "--wait=true", "--timeout=120s")
    kubectl(bins, "delete", "node", *(n["metadata"]["name"] for n in nodes))
    return elapsed


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    bins = control_plane.build()
    was_up = control_plane.status() == 0
    started = time.monotonic()
    if not was_up:
        control_plane.up()
    up_s = time.monotonic() - started
    try:
        print(f"control plane: {'already up' if was_up else f'started in {up_s:.1f} s'}")
        for values in VALUES:
            times = [one_round(bins, values) for _ in range(rounds)]
            print(
                f"{values:<16} helm install -> RayCluster ready: median "
                f"{statistics.median(times):.2f} s, max {max(times):.2f} s over {rounds} "
                f"(target <= 30 s: {'ok' if max(times) <= 30 else 'MISSED'}; "
                f"{30 / max(times):.0f}x under)"
            )
    finally:
        if not was_up:
            control_plane.down()


if __name__ == "__main__":
    main()
