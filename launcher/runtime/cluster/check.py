"""`helm test`'s check: the Ray head answers and the expected number of nodes joined; and, from
the RayCluster's own pods, whether the GKE TPU webhook did its part.

python -m launcher.runtime cluster-check --address http://<cluster>-head-svc:8265 --expect-nodes 5 \
    --ray-cluster <cluster>
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from launcher.core.ray_auth import auth_headers
from launcher.core.tpu.slices import from_pod_spec
from launcher.runtime.cluster.kube_api import KubeApi

WEBHOOK_FIX = (
    "on GKE enable the Ray operator add-on, which installs it (`tpu-launcher gke plan` prints the "
    "command); elsewhere install kuberay-tpu-webhook v1.3.2 or newer"
)


def _affinity_keys(pod: dict) -> set[str]:
    affinity = pod["spec"].get("affinity") or {}
    terms = (affinity.get("podAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", []
    )
    keys = set()
    for term in terms:
        selector = term.get("labelSelector") or {}
        keys |= set(selector.get("matchLabels", {}))
        keys |= {e["key"] for e in selector.get("matchExpressions", [])}
    return keys


def webhook_problems(pods: list[dict]) -> list[str]:
    """What the pods show of the GKE TPU webhook: a multi-host TPU worker without the
    TPU_WORKER_HOSTNAMES it sets was never mutated (no webhook); a Pending one whose required
    pod affinity names a `replicaIndex` label it does not carry met a webhook older than v1.3.2
    (with KubeRay >= 1.6 such a webhook waits for a label nobody sets). A PyTorch release needs
    nothing more: the launcher derives TorchTPU's variables from these
    (launcher.runtime.torch.tpu_env)."""
    unmutated, stranded = [], []
    for pod in pods:
        slices = from_pod_spec(pod["spec"], 1)
        if slices is None:
            continue
        name = pod["metadata"]["name"]
        env = {e["name"] for c in pod["spec"]["containers"] for e in c.get("env", [])}
        if not slices.shape.multi_host:
            continue
        if "TPU_WORKER_HOSTNAMES" not in env:
            unmutated.append(name)
        labels = pod["metadata"].get("labels", {})
        phase = pod.get("status", {}).get("phase", "Pending")
        if phase == "Pending" and "replicaIndex" in _affinity_keys(pod) - set(labels):
            stranded.append(name)
    problems = []
    if unmutated:
        problems.append(
            f"{len(unmutated)} multi-host TPU worker pod(s) ({_names(unmutated)}) have no "
            "TPU_WORKER_HOSTNAMES: the KubeRay "
            "TPU webhook did not mutate them, so JAX cannot join the slice's hosts; " + WEBHOOK_FIX
        )
    if stranded:
        problems.append(
            f"{len(stranded)} TPU worker pod(s) ({_names(stranded)}) stay Pending "
            "on a pod affinity for a `replicaIndex` label no pod carries: the TPU webhook is "
            "older than v1.3.2, which KubeRay >= 1.6 needs; upgrade it to v1.3.2 or newer"
        )
    return problems


def _names(pods: list[str]) -> str:
    return ", ".join(sorted(pods)[:3]) + (", ..." if len(pods) > 3 else "")


def alive_nodes(address: str) -> int:
    request = urllib.request.Request(
        f"{address.rstrip('/')}/nodes?view=summary", headers=auth_headers()
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        body = json.load(resp)
    summary = body.get("data", {}).get("summary", [])
    return sum(1 for node in summary if node.get("raylet", {}).get("state") == "ALIVE")


def check(
    address: str,
    expect_nodes: int,
    timeout: float = 300,
    ray_cluster: str | None = None,
) -> int:
    """0 once at least `expect_nodes` nodes (head + workers) are alive; 1 after `timeout`
    seconds, or as soon as the RayCluster's pods show that the TPU webhook is missing or too
    old."""
    deadline = time.monotonic() + timeout
    seen, last_error = -1, ""
    read_pods = ray_cluster is not None
    while time.monotonic() < deadline:
        if read_pods and ray_cluster is not None:
            try:
                # helm test's service account may list the release's pods.
                pods = KubeApi.in_cluster().pods(f"ray.io/cluster={ray_cluster}")
                problems = webhook_problems(pods)
            except (OSError, KeyError, ValueError) as e:  # no API access: skip this part
                print(f"note: cannot read the RayCluster's pods ({e}); webhook not checked")
                read_pods, problems = False, []
            if problems:
                for problem in problems:
                    print(f"FAILED: {problem}", file=sys.stderr)
                return 1
        try:
            seen = alive_nodes(address)
            if seen >= expect_nodes:
                print(f"ok: the Ray head at {address} answers; {seen} nodes alive")
                return 0
        except (urllib.error.URLError, OSError, ValueError) as e:
            last_error = str(getattr(e, "reason", e))
        time.sleep(3)
    what = f"{seen} of {expect_nodes} nodes alive" if seen >= 0 else f"no answer ({last_error})"
    print(
        f"FAILED: Ray head at {address}: {what} after {timeout:.0f}s; see "
        "`kubectl get pods -l ray.io/cluster` and the worker pods' events",
        file=sys.stderr,
    )
    return 1
