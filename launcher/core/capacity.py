"""How a slice's TPUs are obtained, as GKE labels and taints the nodes of each kind: one value per
TPU block (`capacity`), rendered by the chart from the TPU table's copy of these facts, used by
`gke plan` for the node pool's flags and by the test control plane's fake nodes.

Sources (GKE's guides): "Use Spot VMs" (label and taint cloud.google.com/gke-spot), "Consuming
reserved zonal resources" (cloud.google.com/reservation-name and -affinity), "About flex-start
provisioning mode" and "Run a small batch workload with TPUs and flex-start VMs"
(cloud.google.com/gke-flex-start; TPU v3 and v4 not offered; capacity lasts at most 7 days)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from launcher.core.errors import UsageError

ON_DEMAND, SPOT, RESERVATION, FLEX_START = "on-demand", "spot", "reservation", "flex-start"
RESERVATION_NAME = "{reservation}"  # where the block's reservation name goes
# A reservation another project shares: `projects/OWNER/reservations/NAME`, the form gcloud's
# --reservation takes; its nodes carry the owner in this label beside the name (GKE's
# "Consuming reserved zonal resources", shared reservations; Google's TPU provisioner selects
# the same pair).
RESERVATION_PROJECT_LABEL = "cloud.google.com/reservation-project"
SHARED_RESERVATION = re.compile(r"projects/([^/]+)/reservations/([^/]+)")
# A node pool that starts empty and holds nodes only while pods ask for them (GKE's "About
# cluster autoscaling"; its TPU guide: a multi-host slice's pool scales atomically, all hosts
# or none), up to the slice's hosts (--total-max-nodes, set per pool). Flex-start pools are
# made so; so are the pools of a RayJob's cluster, which exists only while its job runs.
AUTOSCALED_FROM_ZERO = ("--enable-autoscaling", "--num-nodes=0", "--total-min-nodes=0")


@dataclass(frozen=True)
class Capacity:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)  # the pods' node selector
    taints: tuple[dict[str, str], ...] = ()  # what the pods tolerate
    pool_flags: tuple[str, ...] = ()  # `gcloud container node-pools create` flags

    def labels_for(self, reservation: str | None) -> dict[str, str]:
        shared = SHARED_RESERVATION.fullmatch(reservation or "")
        name = shared[2] if shared else reservation or ""
        labels = {k: v.replace(RESERVATION_NAME, name) for k, v in self.node_labels.items()}
        if shared and RESERVATION_NAME in "".join(self.node_labels.values()):
            labels[RESERVATION_PROJECT_LABEL] = shared[1]
        return labels

    def tolerations(self) -> list[dict[str, str]]:
        return [
            {"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]}
            for t in self.taints
        ]


CAPACITIES = {
    c.name: c
    for c in (
        Capacity(ON_DEMAND),  # the pool's own VMs, within the project's quota
        Capacity(
            SPOT,
            {"cloud.google.com/gke-spot": "true"},
            ({"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"},),
            ("--spot",),
        ),
        Capacity(
            RESERVATION,
            {
                "cloud.google.com/reservation-name": RESERVATION_NAME,
                "cloud.google.com/reservation-affinity": "specific",
            },
            (),
            ("--reservation-affinity=specific", f"--reservation={RESERVATION_NAME}"),
        ),
        Capacity(
            FLEX_START,
            {"cloud.google.com/gke-flex-start": "true"},
            (),
            (
                "--flex-start",
                *AUTOSCALED_FROM_ZERO,
                "--location-policy=ANY",
                "--reservation-affinity=none",
                "--no-enable-autorepair",
            ),
        ),
    )
}


# GKE's "About flex-start provisioning mode": TPUs on flex-start need GKE 1.33.0-gke.1712000 or
# later.
FLEX_START_MIN_GKE = "1.33.0-gke.1712000"


# Flex-start with queued provisioning: a Kueue queue on flex-start (`gke queue` gives it GKE's
# ProvisioningRequest admission check), where GKE makes all of a job's nodes at once. GKE's "Run
# a large-scale workload with flex-start with queued provisioning": "To use flex-start with
# queued provisioning, you have to add the --flex-start and --enable-queued-provisioning flags"
# when the node pool is created; its nodes are labelled and tainted cloud.google.com/gke-queued,
# which the pods select and tolerate ("Mandatory for Queued Provisioning" in Google's
# cluster-toolkit example dws-flex-start-queued-provisioning/gke-tpu-v6e). Without the pool
# flag a request never provisions; without the toleration the pods never land. GKE applies the
# taint itself but not the label: the pool is made with it (cluster-toolkit adds it as a node
# label by hand), else the pods' selector matches no node.
QUEUED_LABEL = {"cloud.google.com/gke-queued": "true"}
QUEUED_FLEX_START = Capacity(
    FLEX_START,
    QUEUED_LABEL,
    ({"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"},),
    (
        *CAPACITIES[FLEX_START].pool_flags,
        "--enable-queued-provisioning",
        "--node-labels=" + ",".join(f"{k}={v}" for k, v in QUEUED_LABEL.items()),
    ),
)


def capacity_of(block: dict[str, Any], path: str, generation: str, flex_start: bool) -> Capacity:
    """A TPU block's capacity, checked: reservation needs its name; flex-start is refused where
    GKE does not offer it for the generation."""
    name = block.get("capacity") or ON_DEMAND
    if name not in CAPACITIES:
        raise UsageError(
            f"{path}.capacity",
            f"unknown capacity {name!r}",
            f"one of {', '.join(CAPACITIES)} (--set {path}.capacity=spot)",
        )
    if name == RESERVATION and not block.get("reservation"):
        raise UsageError(
            f"{path}.reservation",
            "capacity: reservation names no reservation",
            f"--set {path}.reservation=<name> (gcloud compute reservations list)",
        )
    if name == FLEX_START and not flex_start:
        raise UsageError(
            f"{path}.capacity",
            f"GKE offers no flex-start for TPU {generation}",
            f"--set {path}.capacity=spot (or on-demand, or a reservation)",
        )
    return CAPACITIES[name]


def release_capacity(
    values: dict[str, Any], component: str, block: dict[str, Any], path: str, generation: Any
) -> Capacity:
    """What a release's slice group gets, as the chart renders it (templates/_tpu.tpl): its
    capacity, or queued provisioning for the Ray workers on flex-start under a Kueue queue."""
    capacity = capacity_of(block, path, generation.name, generation.flex_start)
    queue = (values.get("kueue") or {}).get("queueName")
    if capacity.name == FLEX_START and component == "ray" and queue:
        return QUEUED_FLEX_START
    return capacity


def capacity_from_selector(selector: dict[str, str]) -> tuple[Capacity, str | None]:
    """The capacity a rendered pod's node selector asks for, and its reservation's name."""
    for capacity in (QUEUED_FLEX_START, *CAPACITIES.values()):
        if capacity.node_labels and all(k in selector for k in capacity.node_labels):
            named = [k for k, v in capacity.node_labels.items() if v == RESERVATION_NAME]
            if not named:
                return capacity, None
            name = selector[named[0]]
            if owner := selector.get(RESERVATION_PROJECT_LABEL):
                name = f"projects/{owner}/reservations/{name}"
            return capacity, name
    return CAPACITIES[ON_DEMAND], None


def _json(c: Capacity) -> dict[str, Any]:
    return {"nodeSelector": c.node_labels, "tolerations": c.tolerations()}


def table_json() -> dict[str, Any]:
    """The chart's copy (files/tpu-table.json's `capacities`)."""
    return {c.name: _json(c) for c in CAPACITIES.values()}


def shared_reservation_json() -> dict[str, str]:
    """The chart's copy of a shared reservation's form and label (`sharedReservation`)."""
    return {"pattern": SHARED_RESERVATION.pattern, "projectLabel": RESERVATION_PROJECT_LABEL}


def queued_json() -> dict[str, Any]:
    """The chart's copy of flex-start under a Kueue queue (`queuedProvisioning`)."""
    return _json(QUEUED_FLEX_START)
