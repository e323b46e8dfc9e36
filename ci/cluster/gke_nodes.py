"""Fake GKE nodes (kwok) for a values file: the node pools a platform team would create for it.

Every TPU slice is one node pool of `hosts` nodes, labelled and sized as GKE labels and sizes its
TPU nodes (accelerator, topology, node pool, machine type, google.com/tpu capacity, the
google.com/tpu taint); a CPU pool takes the Ray head and Saxml's CPU servers. Shapes come from the
launcher's TPU table, not from the values under test, so a values file that disagrees with the
hardware is left Pending by the real scheduler, as on GKE.

    python ci/cluster/gke_nodes.py values/v6e-16.yaml | kubectl apply -f -
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from launcher.core.tpu.capacity import (  # noqa: E402
    POOL_CAPACITY_LABEL,
    Capacity,
    CapacityItem,
    capacity_items,
    queued_items,
)
from launcher.core.tpu.machines import CPU_POOL_MACHINE, MACHINES, node_vcpus  # noqa: E402
from launcher.core.tpu.slices import Slices  # noqa: E402
from launcher.core.tpu.table import GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL  # noqa: E402
from launcher.core.values_file import TPU_BLOCKS, load_values, tpu_blocks, tpu_slices  # noqa: E402

CHART = ROOT / "charts" / "tpu-stack"
ZONE = "us-east5-b"  # fake; one zone for every pool
CPU_POOL_NODES = 3
# Marks the node as kwok's to fake (kwokctl's controller selects on this annotation).
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
POOL_LABEL = "cloud.google.com/gke-nodepool"


def merged_values(*values_files: Path) -> dict:
    """The chart's defaults overlaid with the files, as Helm merges them."""
    return load_values(CHART / "values.yaml", *values_files)


def node(
    name: str, pool: str, machine: str, labels: dict, tpu_chips: int = 0, taints: tuple = ()
) -> dict:
    size = MACHINES[machine]
    capacity = {"cpu": str(node_vcpus(machine)), "memory": f"{size.memory_gib}Gi", "pods": "110"}
    spec: dict = {}
    if tpu_chips:
        capacity["google.com/tpu"] = str(tpu_chips)
        spec["taints"] = [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}]
        spec["taints"] += [dict(t) for t in taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": dict(KWOK_ANNOTATION),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": machine,
                "topology.kubernetes.io/zone": ZONE,
                POOL_LABEL: pool,
                "type": "kwok",
                **labels,
            },
        },
        "spec": spec,
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def tpu_pools(
    prefix: str,
    slices: Slices,
    suffix: str,
    capacity: Capacity,
    reservation: str | None,
    tag: str = "",
) -> list[dict]:
    """The pools of one slice group, labelled (and tainted) as GKE makes its capacity's nodes;
    a fallback's item's pools are named after it."""
    shape = slices.shape
    assert shape is not None
    gen = shape.generation
    labels = {
        GKE_ACCELERATOR_LABEL: gen.gke_accelerator,
        GKE_TOPOLOGY_LABEL: shape.topology,
        **capacity.labels_for(reservation),
        # As `gke plan` labels a fallback's pools (launcher.core.tpu.capacity.POOL_CAPACITY_LABEL).
        **({POOL_CAPACITY_LABEL: capacity.name} if tag else {}),
    }
    nodes = []
    for s in range(slices.num_slices):
        pool = f"{prefix}-{shape.generation.name}-{shape.topology}{tag}-{s}{suffix}"
        nodes += [
            node(
                f"{pool}-{h}",
                pool,
                shape.machine_type,
                labels,
                shape.chips_per_host,
                capacity.taints,
            )
            for h in range(shape.hosts)
        ]
    return nodes


def release_capacities(
    values: dict, component: str, block: dict, path: str, generation: Any
) -> list[CapacityItem]:
    """What a release's slice group gets, as the chart renders it (templates/_tpu.tpl): its
    capacity items, flex-start as queued provisioning for the Ray workers under a Kueue
    queue. (The client reads the same from the render: launcher.core.tpu.capacity.items_of_pod.)"""
    items = capacity_items(block, path, generation.name, generation.flex_start)
    queue = (values.get("kueue") or {}).get("queueName")
    return queued_items(items) if component == "ray" and queue else items


def nodes_for(values: dict, suffix: str = "") -> list[dict]:
    """Node (and pool) names end in `suffix`: nodes are cluster-wide, and several sets may
    coexist (one per test)."""
    nodes = [
        node(f"cpu-pool{suffix}-{i}", f"cpu-pool{suffix}", CPU_POOL_MACHINE, {})
        for i in range(CPU_POOL_NODES)
    ]
    prefixes = {"ray": "ray", "saxml": "sax", "vllm": "vllm"}
    blocks = tpu_blocks(values)
    for component, slices in tpu_slices(values).items():
        path = ".".join(TPU_BLOCKS[component])
        block = blocks[component]
        items = release_capacities(values, component, block, path, slices.shape.generation)
        for item in items:
            # A fallback's items each have their pools (launcher.client.gke.release.NodePool).
            tag = "-" + re.sub(r"[^a-z0-9-]", "-", item.word) if len(items) > 1 else ""
            nodes += tpu_pools(
                prefixes[component], slices, suffix, item.capacity, item.reservation, tag
            )
    return nodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("values", nargs="+", type=Path, help="values files, in helm's order")
    args = parser.parse_args(argv)
    print("\n---\n".join(json.dumps(n) for n in nodes_for(merged_values(*args.values))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
