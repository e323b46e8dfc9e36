"""What GKE leaves to pods on a node, and the CPU pool `gke plan` sizes from the release's pods.
The reservations are GKE's ("Standard cluster architecture: node allocatable resources"), written
here as facts: CPU 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% above
four; memory 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112,
2% above 128, plus the 100 MiB eviction threshold."""

from __future__ import annotations

import pytest

from launcher.client.gke.release import allocatable, cpu_pool, pod_requests
from launcher.client.gke.target import GkeTarget, region
from launcher.core.errors import UsageError
from launcher.core.tpu.table import TPU_ZONES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("machine", "cpu", "gib"),
    [
        # 4 vCPU: 0.06 + 0.01 + 2 x 0.005 reserved; 16 GiB: 1 + 0.8 + 0.8 GiB, + 100 MiB.
        ("n2-standard-4", 3.92, 16 - 2.6 - 100 / 1024),
        # 16 vCPU: + 12 x 0.0025; 64 GiB: + 48 x 6%.
        ("n2-standard-16", 15.89, 64 - 5.48 - 100 / 1024),
        # A v6e host, 720 GiB (2% of what lies above 128 GiB) and 180 vCPU made 90 by the
        # tutorial's --threads-per-core=1 (Compute Engine: "the number of vCPUs is halved").
        ("ct6e-standard-4t", 90 - 0.08 - 86 * 0.0025, 720 - 9.32 - 592 * 0.02 - 100 / 1024),
        ("ct5p-hightpu-4t", 208 - 0.08 - 204 * 0.0025, 448 - 9.32 - 320 * 0.02 - 100 / 1024),
    ],
)
def test_allocatable_is_capacity_less_what_gke_reserves(machine, cpu, gib):
    assert allocatable(machine) == pytest.approx((cpu, gib), abs=1e-6)


def test_the_tutorials_head_needs_a_16_vcpu_machine():
    # 8 CPU + the gcsfuse sidecar's 250m: more than an n2-standard-8 leaves (7.91 - DaemonSets).
    pool = cpu_pool("tpu", [(8.25, 16.25), (0.1, 0.1)])
    assert (pool.name, pool.machine, pool.nodes, pool.pods) == ("tpu-cpu", "n2-standard-16", 1, 2)


def test_pods_that_do_not_fit_one_node_get_more_nodes():
    pool = cpu_pool("r", [(3.0, 4.0)] * 5)  # n2-standard-4 holds one each (3.42 CPU of room)
    assert (pool.machine, pool.nodes) == ("n2-standard-4", 5)
    pool = cpu_pool("r", [(3.0, 4.0)] * 5 + [(6.0, 8.0)])  # the largest picks the machine
    # 7.41 CPU of room a node: 6 alone, then two 3s a node (whole pods, first fit).
    assert (pool.machine, pool.nodes) == ("n2-standard-8", 4)


def test_no_pods_no_pool_and_a_pod_too_large_for_the_series_is_refused():
    assert cpu_pool("r", []) is None
    with pytest.raises(UsageError, match="more than one n2-standard-32 node holds"):
        cpu_pool("r", [(40.0, 1.0)])


def test_requests_default_to_limits_as_kubernetes_does():
    pod = {
        "containers": [
            {"resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}},
            {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}}},
        ]
    }
    assert pod_requests(pod) == pytest.approx((2.5, 1.5))


def test_the_target_names_the_image_and_the_region_once():
    target = GkeTarget(project="p", location="us-east5-b", bucket="ck")
    assert region("us-east5-b") == "us-east5" and region("us-east5") == "us-east5"
    # AI zones are zones of their region (Compute Engine: About AI zones), as the table lists.
    assert region("us-central1-ai1a") == "us-central1" and region("us-south1-ai1b") == "us-south1"
    assert region("northamerica-northeast1") == "northamerica-northeast1"
    assert region("northamerica-northeast1-b") == "northamerica-northeast1"
    assert all(region(zone) == home for zone, home in TPU_ZONES.items())
    assert GkeTarget(location="us-central1-ai1a").zone == "us-central1-ai1a"
    assert target.helm_sets() == [
        "ray.image.registry=us-east5-docker.pkg.dev",
        "ray.image.repository=p/tpu-stack/launcher",
        "global.gcsfuse.bucketName=ck",
    ]
    assert target.kube_context == "gke_p_us-east5-b_ml".replace("ml", "${CLUSTER_NAME}")
    own = GkeTarget(project="p", location="us-east5", registry="ghcr.io/team/images")
    assert own.image_repository == ("ghcr.io", "team/images/launcher")
    assert GkeTarget().unset() == ["CLUSTER_NAME", "LOCATION", "NODE_ZONE", "PROJECT_ID"]
