"""A Ray driver that reserves TPU slices as Ray Serve LLM reserves one per replica (its own
TPUAccelerator over ray.util.tpu.SlicePlacementGroup), run against the local cluster by
tests/e2e/test_serve_slice.py. Writes one JSON file: where each reservation's bundles landed
(the slice and worker id of each node), whether one more, beyond the cluster's slices, was
refused while they were held, and where it landed once the first was given back. A file, not
stdout: Ray's own processes print there too, after the driver's last line (seen in CI).

Usage: python -m tests.support.serve_slice_driver ACCELERATOR_TYPE TOPOLOGY SLICES OUT_JSON"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import ray
from ray.llm._internal.serve.core.configs.accelerators import TPUAccelerator, TPUConfig
from ray.util.placement_group import placement_group_table
from ray.util.tpu import get_tpu_version_from_type, slice_placement_group

SLICE_LABEL, WORKER_LABEL = "ray.io/tpu-slice-name", "ray.io/tpu-worker-id"


def main(accelerator_type: str, topology: str, slices: int, out: Path) -> None:
    ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR", log_to_driver=False)
    labels = {n["NodeID"]: n.get("Labels", {}) for n in ray.nodes()}
    chips = 1
    for d in topology.split("x"):
        chips *= int(d)

    def reserve(i: int) -> tuple[TPUAccelerator, ray.util.placement_group.PlacementGroup]:
        tpu = TPUAccelerator(TPUConfig(topology=topology))
        bundles = tpu.default_bundles(num_devices=chips, accelerator_type_str=accelerator_type)
        pg = tpu.create_placement_group(
            bundles=bundles, strategy="SPREAD", name=f"replica-{i}",
            accelerator_type_str=accelerator_type,
        )  # fmt: skip
        return tpu, pg

    held = [reserve(i) for i in range(slices)]
    placed = []
    for _, pg in held:
        ray.get(pg.ready(), timeout=60)
        nodes = placement_group_table(pg)["bundles_to_node_id"].values()
        placed.append(sorted((labels[n][SLICE_LABEL], labels[n][WORKER_LABEL]) for n in nodes))
    # One more whole slice than the cluster has: its head host cannot be reserved while every
    # slice is held (SlicePlacementGroup reserves the slice's worker 0 first, then the rest).
    try:
        slice_placement_group(
            topology=topology,
            accelerator_version=get_tpu_version_from_type(accelerator_type),
            head_reservation_timeout_s=3,
        )
        waited = False
    except TimeoutError:
        waited = True
    held[0][0].shutdown()  # the first replica gives its slice back
    extra_tpu, extra = reserve(slices)
    ray.get(extra.ready(), timeout=60)
    nodes = placement_group_table(extra)["bundles_to_node_id"].values()
    after = sorted((labels[n][SLICE_LABEL], labels[n][WORKER_LABEL]) for n in nodes)
    for tpu, _ in [*held[1:], (extra_tpu, extra)]:
        tpu.shutdown()
    out.write_text(json.dumps({"placed": placed, "extra_waited": waited, "extra_placed": after}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
