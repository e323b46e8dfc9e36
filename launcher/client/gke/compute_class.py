"""The GKE ComputeClass a capacity fallback walks (`capacityFallback: computeclass`), from the same
render `gke plan` reads: one per slice group whose pods select a class, its priorities the
group's capacity items in order, each a TPU rule for the slice's nodes (GKE's ComputeClass
reference, cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass: `tpu: {type,
count, topology}`, `spot`, `reservations: {affinity: Specific, specific: [{name, project}]}`).

GKE scales up the first rule's pool it can get capacity for; the pools are the ones `gke plan`
makes (each labelled and tainted with the class), so GKE makes no pool of its own
(`nodePoolAutoCreation: false`), and a job keeps the nodes it got (`activeMigration` off: moving
a training job back to a freed reservation is a restart from its checkpoint, which a user asks
for, not GKE).

    tpu-launcher gke compute-class --values values/v6e-16.yaml | kubectl apply -f -
"""

from __future__ import annotations

from typing import Any

from launcher.client.gke.release import NodePool
from launcher.core.capacity import RESERVATION, SHARED_RESERVATION, SPOT, CapacityItem

API = "cloud.google.com/v1"


def priority(pool: NodePool, item: CapacityItem) -> dict[str, Any]:
    """One rule: the slice's nodes, as the item obtains them."""
    shape = pool.slices.shape
    rule: dict[str, Any] = {
        "tpu": {
            "type": shape.generation.gke_accelerator,
            "count": shape.chips_per_host,
            "topology": shape.topology,
        }
    }
    if item.capacity.name == SPOT:
        rule["spot"] = True
    if item.capacity.name == RESERVATION and item.reservation:
        shared = SHARED_RESERVATION.fullmatch(item.reservation)
        named = {"name": shared[2], "project": shared[1]} if shared else {"name": item.reservation}
        rule["reservations"] = {"affinity": "Specific", "specific": [named]}
    return rule


def compute_classes(pools: list[NodePool]) -> list[dict[str, Any]]:
    """A ComputeClass per class the pools join, its priorities in the fallback's order."""
    found: dict[str, NodePool] = {}
    for pool in pools:
        if pool.compute_class:
            found.setdefault(pool.compute_class, pool)
    return [
        {
            "apiVersion": API,
            "kind": "ComputeClass",
            "metadata": {"name": name},
            "spec": {
                "priorities": [priority(pool, item) for item in pool.fallback],
                "nodePoolAutoCreation": {"enabled": False},
                "activeMigration": {"optimizeRulePriority": False},
                "whenUnsatisfiable": "DoNotScaleUp",
            },
        }
        for name, pool in found.items()
    ]
