"""What capacity this TPU host got: the chart tells each host its capacity's items
(launcher.core.tpu.capacity.CAPACITY_ENV); one item is the answer, a fallback's list is not, and the
host reads its own node's labels, which GKE sets by how the node was obtained (Spot, a
reservation, flex-start), through the API server with its pod's token (the chart's ClusterRole
lets the workers' account get nodes, nothing else).

What it got decides what a preemption notice is: on Spot or flex-start a reclaim, on on-demand
or reserved nodes a maintenance event or a scale-down, whose restart is counted as a failure."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from launcher.core.tpu.capacity import CAPACITY_ENV, CapacityItem, capacity_of_node, parse_items
from launcher.runtime.cluster.kube_api import IN_CLUSTER, KubeApi

NODE_ENV = "NODE_NAME"  # the chart's downward API: the pod's spec.nodeName

log = logging.getLogger(__name__)


def capacity_here(
    env: Mapping[str, str] = os.environ, account: Path = IN_CLUSTER
) -> CapacityItem | None:
    """This host's capacity; None where nothing says (the local cluster; a node that could not
    be read, said in the log: a notice then counts as a preemption, as with one capacity)."""
    words = env.get(CAPACITY_ENV)
    if not words:
        return None
    items = parse_items(words)
    if len(items) == 1:
        return items[0]
    node = env.get(NODE_ENV)
    try:
        if not node:
            raise OSError(f"no {NODE_ENV} in the pod's env")
        metadata = KubeApi.in_cluster(env=env, account=account).node(node)["metadata"]
        return capacity_of_node(metadata.get("labels", {}))
    except (OSError, ValueError, KeyError) as e:
        log.warning(
            "launcher: which of the capacities %s this host got is unknown (its node's labels "
            "could not be read: %s); a preemption notice counts as a preemption",
            words,
            e,
        )
        return None
