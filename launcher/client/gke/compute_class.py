"""The GKE ComputeClass a capacity fallback walks (`capacityFallback: computeclass`), from the same
render `gke plan` reads: one per slice group whose pods select a class, its priorities the
group's capacity items in order, each a rule naming the item's own node pools (GKE's
ComputeClass reference, cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass:
`nodepools`, the manually created pools a rule stands for).

The pools are the ones `gke plan` makes, each made as its item obtains TPUs (`--reservation`,
`--spot`, on demand with `--reservation-affinity=none`), labelled and tainted with the class.
A rule by name selects exactly that item's pools: a rule by attributes (`tpu`, `spot`,
`reservations`) would match any pool of the class that has them (an on-demand rule matches the
reservation's pool too) and is how GKE picks what to auto-create, which this class turns off
(`nodePoolAutoCreation: false`). A job keeps the nodes it got (`activeMigration` off: moving
a training job back to a freed reservation is a restart from its checkpoint, which a user asks
for, not GKE).

    tpu-launcher gke compute-class --values values/v6e-16.yaml | kubectl apply -f -
"""

from __future__ import annotations

from typing import Any

from launcher.client.gke.pools import pool_names
from launcher.client.gke.release import NodePool

API = "cloud.google.com/v1"


def priority(pool: NodePool) -> dict[str, Any]:
    """One rule: the item's own pools, by name (one per slice of a multi-host group)."""
    return {"nodepools": pool_names(pool)}


def compute_classes(pools: list[NodePool]) -> list[dict[str, Any]]:
    """A ComputeClass per class the pools join, its priorities in the fallback's order (the
    pools of a class are its items', made in that order)."""
    found: dict[str, list[NodePool]] = {}
    for pool in pools:
        if pool.compute_class:
            found.setdefault(pool.compute_class, []).append(pool)
    return [
        {
            "apiVersion": API,
            "kind": "ComputeClass",
            "metadata": {"name": name},
            "spec": {
                "priorities": [priority(pool) for pool in members],
                "nodePoolAutoCreation": {"enabled": False},
                "activeMigration": {"optimizeRulePriority": False},
                "whenUnsatisfiable": "DoNotScaleUp",
            },
        }
        for name, members in found.items()
    ]
