"""What capacity this TPU host got: the chart tells each host its capacity's items
(launcher.core.capacity.CAPACITY_ENV); one item is the answer, a fallback's list is not, and the
host reads its own node's labels, which GKE sets by how the node was obtained (Spot, a
reservation, flex-start), through the API server with its pod's token (the chart's ClusterRole
lets the workers' account get nodes, nothing else).

What it got decides what a preemption notice is: on Spot or flex-start a reclaim, on on-demand
or reserved nodes a maintenance event or a scale-down, whose restart is counted as a failure."""

from __future__ import annotations

import json
import logging
import os
import ssl
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from launcher.core.capacity import CAPACITY_ENV, CapacityItem, capacity_of_node, parse_items

ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
NODE_ENV = "NODE_NAME"  # the chart's downward API: the pod's spec.nodeName
TIMEOUT_S = 10

log = logging.getLogger(__name__)


def node_labels(server: str, node: str, token: str, ca_file: Path | None) -> dict[str, str]:
    """A node's labels from the API server (GET /api/v1/nodes/NAME)."""
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    request = urllib.request.Request(
        f"{server.rstrip('/')}/api/v1/nodes/{node}",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as answer:
        labels: dict[str, str] = json.load(answer)["metadata"].get("labels", {})
        return labels


def _server(host: str, port: str) -> str:
    """The API server as a pod reaches it (Kubernetes sets these two in every pod's env)."""
    return f"https://{f'[{host}]' if ':' in host else host}:{port}"


def capacity_here(
    env: Mapping[str, str] = os.environ, account: Path = ACCOUNT
) -> CapacityItem | None:
    """This host's capacity; None where nothing says (the local cluster; a node that could not
    be read, said in the log: a notice then counts as a preemption, as with one capacity)."""
    words = env.get(CAPACITY_ENV)
    if not words:
        return None
    items = parse_items(words)
    if len(items) == 1:
        return items[0]
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    node = env.get(NODE_ENV)
    try:
        if not (host and node):
            raise OSError(f"no {NODE_ENV} or KUBERNETES_SERVICE_HOST in the pod's env")
        server = _server(host, port)
        token = (account / "token").read_text().strip()
        ca = account / "ca.crt"
        return capacity_of_node(node_labels(server, node, token, ca if ca.is_file() else None))
    except (OSError, ValueError, KeyError) as e:
        log.warning(
            "launcher: which of the capacities %s this host got is unknown (its node's labels "
            "could not be read: %s); a preemption notice counts as a preemption",
            words,
            e,
        )
        return None
