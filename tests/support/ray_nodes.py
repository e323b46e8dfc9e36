"""ray.nodes()-shaped dicts for plan tests, built from what the local cluster starts."""

from __future__ import annotations

from launcher.client.local.layout import host_nodes


def ray_nodes(accel="v6e", topology="4x4", num_slices=1, drop=0):
    """A real TPU host's resources and labels per simulated host, plus a head without TPUs;
    `drop` leaves the last hosts out (a slice not fully up)."""
    nodes = [{"Alive": True, "NodeID": "head", "Resources": {"CPU": 8.0}, "Labels": {}}]
    for i, spec in enumerate(host_nodes(accel, topology, num_slices, None, None)):
        nodes.append(
            {
                "Alive": True,
                "NodeID": f"n{i}",
                "Resources": {k: float(v) for k, v in spec["resources"].items()},
                "Labels": spec["labels"],
            }
        )
    return nodes[: len(nodes) - drop]
