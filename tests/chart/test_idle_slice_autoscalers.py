"""Why a standing release does not scale its slices to zero: the release's RayCluster, given
KubeRay's in-tree autoscaling as KubeRay's docs do it, read by Ray 2.60's own autoscaler code
(docs/jobs.md, "Idle slices"; tests/cluster/test_idle_slices.py shows the scale-down side).

The autoscaler (the KubeRay sidecar) derives its node types from the RayCluster with Ray's
`_derive_autoscaling_config_from_ray_cr` and scales them for the demand a job makes. A TPU
job's first demand is JaxTrainer's slice reservation: one bundle of the slice's
`TPU-<pod type>-head` resource, selecting the host labelled worker 0 of that pod type (Ray's
`reserve_tpu_slice`). These tests give that demand, captured from Ray's own function, to each
of Ray's two schedulers. If one fails, Ray's behaviour changed: read docs/jobs.md again.
Nothing here needs a Ray cluster or a Kubernetes API.
"""

from __future__ import annotations

import pytest
import ray._private.accelerators.tpu as ray_tpu
from ray.autoscaler._private.kuberay.autoscaling_config import (
    _derive_autoscaling_config_from_ray_cr,
)

from harness.helm import by_kind, render
from harness.paths import REPO

pytestmark = pytest.mark.chart


def autoscaled_release() -> dict:
    """The tutorial's release (v6e-16: one slice of 4 hosts) with KubeRay's autoscaling on."""
    (cluster,) = by_kind(render(REPO / "values" / "v6e-16.yaml"), "RayCluster")
    cluster["metadata"]["namespace"] = "ml"  # helm template leaves it to the install
    cluster["spec"]["enableInTreeAutoscaling"] = True
    cluster["spec"]["workerGroupSpecs"][0]["minReplicas"] = 0
    return cluster


class _Captured(Exception):
    pass


def jaxtrainer_head_reservation(topology: str, accelerator: str) -> tuple[list, list]:
    """The bundles and label selectors Ray's reserve_tpu_slice asks for, captured at the call
    to placement_group (no Ray cluster runs)."""
    seen: dict = {}

    def capture(bundles, bundle_label_selector=None, **_):
        seen.update(bundles=bundles, selectors=bundle_label_selector)
        raise _Captured

    original = ray_tpu.placement_group
    ray_tpu.placement_group = capture
    try:
        with pytest.raises(_Captured):
            ray_tpu.reserve_tpu_slice(topology, accelerator)
    finally:
        ray_tpu.placement_group = original
    return seen["bundles"], seen["selectors"]


def test_rays_autoscaler_sees_a_whole_slice_per_replica():
    node_types = _derive_autoscaling_config_from_ray_cr(autoscaled_release())[
        "available_node_types"
    ]
    tpu = node_types["tpu-group"]
    # v6e-16: 4 hosts of 4 chips; min 0 (released when idle), max one slice's hosts.
    assert (tpu["min_workers"], tpu["max_workers"]) == (0, 4)
    assert tpu["resources"]["TPU"] == 4
    assert tpu["resources"]["TPU-v6e-16-head"] == 1


def test_autoscaler_v1_brings_a_slice_back_for_jaxtrainers_reservation():
    """v1 places the reservation's bundle on a new node of the TPU group (it reads no label
    selectors); its KubeRay provider then sets replicas=1 and KubeRay makes the whole slice."""
    from ray.autoscaler._private.resource_demand_scheduler import ResourceDemandScheduler
    from ray.core.generated.common_pb2 import Bundle, PlacementStrategy
    from ray.core.generated.gcs_pb2 import PlacementGroupTableData

    config = _derive_autoscaling_config_from_ray_cr(autoscaled_release())
    bundles, _ = jaxtrainer_head_reservation("4x4", "TPU-V6E")
    pending = PlacementGroupTableData(
        strategy=PlacementStrategy.PACK,  # reserve_tpu_slice's (placement_group's default)
        bundles=[Bundle(unit_resources=b) for b in bundles],
    )
    scheduler = ResourceDemandScheduler(
        provider=None,
        node_types=config["available_node_types"],
        max_workers=config["max_workers"],
        head_node_type=config["head_node_type"],
        upscaling_speed=config["upscaling_speed"],
    )
    to_launch, unfulfilled = scheduler.get_nodes_to_launch(
        nodes=[],
        launching_nodes={},
        resource_demands=[],
        unused_resources_by_ip={},
        pending_placement_groups=[pending],
        max_resources_by_ip={},
        ensure_min_cluster_size=[],
        node_availability_summary=None,
    )
    # One TPU host asked for (and a head, which a real cluster has: none was given here).
    assert to_launch.get("tpu-group") == 1 and not unfulfilled, (to_launch, unfulfilled)


def test_autoscaler_v2_leaves_jaxtrainers_reservation_infeasible():
    """v2 matches the reservation's label selector (worker 0 of pod type v6e-16) against the
    labels a node type declares, and a TPU host gets those labels only once it runs: a job
    waits forever for a slice scaled to zero."""
    from ray.autoscaler._private.event_summarizer import EventSummarizer
    from ray.autoscaler.v2.event_logger import AutoscalerEventLogger
    from ray.autoscaler.v2.instance_manager.config import AutoscalingConfig
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler, SchedulingRequest
    from ray.autoscaler.v2.utils import ResourceRequestUtil
    from ray.core.generated.autoscaler_pb2 import BundleSelector, GangResourceRequest
    from ray.core.generated.common_pb2 import LabelSelectorOperator

    config = AutoscalingConfig(_derive_autoscaling_config_from_ray_cr(autoscaled_release()))
    bundles, selectors = jaxtrainer_head_reservation("4x4", "TPU-V6E")
    assert selectors == [{"ray.io/tpu-worker-id": "0", "ray.io/tpu-pod-type": "v6e-16"}]
    requests = [
        ResourceRequestUtil.make(
            bundle,
            label_selectors=[
                [(k, LabelSelectorOperator.LABEL_OPERATOR_IN, [v]) for k, v in sorted(sel.items())]
            ],
        )
        for bundle, sel in zip(bundles, selectors, strict=True)
    ]
    gang = GangResourceRequest(
        requests=[ResourceRequestUtil.make(b) for b in bundles],
        bundle_selectors=[BundleSelector(resource_requests=requests)],
    )
    reply = ResourceDemandScheduler(AutoscalerEventLogger(EventSummarizer())).schedule(
        SchedulingRequest(
            node_type_configs=config.get_node_type_configs(),
            max_num_nodes=config.get_max_num_nodes(),
            gang_resource_requests=[gang],
            disable_launch_config_check=True,
        )
    )
    assert not reply.to_launch
    assert len(reply.infeasible_gang_resource_requests) == 1
