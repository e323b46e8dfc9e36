"""The Kueue objects a platform team's queue for a release's TPU slices needs, from the same
render `gke plan` reads (so from the TPU table and the capacity the pods ask for):

- a ResourceFlavor per slice shape and capacity, with the GKE node labels its pods land on (and
  the Spot toleration), and one for CPU (the Ray head, KubeRay's submitter);
- a ClusterQueue whose google.com/tpu quota is whole slices (Kueue then admits a job whole or
  not at all), lower priorities preempted for higher ones;
- the LocalQueue the release names (`kueue.queueName`);
- on flex-start, GKE's ProvisioningRequest admission check (GKE: "Run a large-scale workload
  with flex-start with queued provisioning"): Kueue admits a job once GKE has provisioned its
  nodes, all at once.

    tpu-launcher gke queue --values values/v6e-16.yaml --queue team-a --namespace ml \
        | kubectl apply -f -
"""

from __future__ import annotations

from typing import Any

from launcher.client.gke.release import NodePool
from launcher.core.tpu.capacity import FLEX_START, POOL_CAPACITY_LABEL
from launcher.core.tpu.table import GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL

# The pinned Kueue's current version (ci/versions.env: v0.15 serves v1beta1 deprecated, "Use
# v1beta2 instead"), which has no ClusterQueue.admissionChecks: admissionChecksStrategy only.
API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TPU = "google.com/tpu"
CPU_FLAVOR = "cpu"
# Kueue's controller for GKE's ProvisioningRequests and GKE's class for queued provisioning.
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
# The CPU the queue lends its pods that hold no TPU: far more than they ask, it never binds.
CPU_QUOTA, MEMORY_QUOTA = "1000", "4000Gi"


def flavor_name(pool: NodePool) -> str:
    shape = pool.slices.shape
    name = f"tpu-{shape.generation.name}-{shape.topology}-{pool.capacity.name}"
    # Two reservations in one fallback are two flavors.
    if pool.fallback and pool.reservation:
        return f"{name}-{pool.reservation.rsplit('/', 1)[-1]}"
    return name


def resource_flavor(pool: NodePool) -> dict[str, Any]:
    shape = pool.slices.shape
    spec: dict[str, Any] = {
        "nodeLabels": {
            GKE_ACCELERATOR_LABEL: shape.generation.gke_accelerator,
            GKE_TOPOLOGY_LABEL: shape.topology,
            **pool.capacity.labels_for(pool.reservation),
            # A fallback's item: its own pools only (on demand has no GKE label of its own).
            **({POOL_CAPACITY_LABEL: pool.capacity.name} if pool.fallback else {}),
        }
    }
    if pool.capacity.taints:
        spec["tolerations"] = pool.capacity.tolerations()
    return {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor_name(pool)},
        "spec": spec,
    }


def queue_objects(
    pools: list[NodePool], queue: str, namespace: str, quota_slices: int | None = None
) -> list[dict[str, Any]]:
    """The objects, in the order `kubectl apply` needs them. `quota_slices`: how many slices
    of each shape the queue may hold at once (default: the release's own count)."""
    flavors = {flavor_name(p): p for p in pools}
    cluster_queue = f"{queue}-tpu"
    objects: list[dict[str, Any]] = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": CPU_FLAVOR}},
        *(resource_flavor(p) for p in flavors.values()),
    ]
    tpu_flavors = []
    for name, pool in flavors.items():
        slices = quota_slices if quota_slices is not None else pool.slices.num_slices
        chips = pool.slices.shape.chips * slices
        tpu_flavors.append({"name": name, "resources": [{"name": TPU, "nominalQuota": chips}]})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": CPU_FLAVOR,
                        "resources": [
                            {"name": "cpu", "nominalQuota": CPU_QUOTA},
                            {"name": "memory", "nominalQuota": MEMORY_QUOTA},
                        ],
                    }
                ],
            },
            {"coveredResources": [TPU], "flavors": tpu_flavors},
        ],
    }
    if any(p.fallback for p in pools):
        # A capacity fallback: the flavors in the list's order, and where one's quota is used
        # up Kueue tries the next before it would borrow or preempt (Kueue's "Flavor
        # fungibility"; its defaults borrow and preempt in the first flavor instead).
        spec["flavorFungibility"] = {
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
        }
    flex = [name for name, p in flavors.items() if p.capacity.name == FLEX_START]
    if flex:
        check = f"{queue}-flex-start"
        objects += [
            {
                "apiVersion": API,
                "kind": "ProvisioningRequestConfig",
                "metadata": {"name": check},
                "spec": {
                    "provisioningClassName": QUEUED_PROVISIONING_CLASS,
                    "managedResources": [TPU],
                },
            },
            {
                "apiVersion": API,
                "kind": "AdmissionCheck",
                "metadata": {"name": check},
                "spec": {
                    "controllerName": PROVISIONING_CONTROLLER,
                    "parameters": {
                        "apiGroup": "kueue.x-k8s.io",
                        "kind": "ProvisioningRequestConfig",
                        "name": check,
                    },
                },
            },
        ]
        if len(flavors) > len(flex):
            # GKE's provisioning for the flex-start flavor only: a job admitted on another
            # flavor must not wait for a ProvisioningRequest (Kueue's admissionChecksStrategy).
            spec["admissionChecksStrategy"] = {
                "admissionChecks": [{"name": check, "onFlavors": flex}]
            }
        else:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    objects += [
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue},
            "spec": spec,
        },
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": queue, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        },
    ]
    return objects
