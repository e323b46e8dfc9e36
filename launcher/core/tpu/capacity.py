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
        # The pool's own VMs, within the project's quota, and never a reservation's: a pool's
        # default affinity (ANY) would consume any matching reservation a team holds for
        # another pool (GKE's DWS + Kueue tutorial makes its on-demand pool this way).
        Capacity(ON_DEMAND, pool_flags=("--reservation-affinity=none",)),
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
# GKE's "About custom ComputeClasses": "Custom ComputeClasses are available in GKE Autopilot mode
# and GKE Standard mode in version 1.30.3-gke.1451000 and later."
COMPUTE_CLASS_MIN_GKE = "1.30.3-gke.1451000"
# The node label `gke plan` gives each pool of a Kueue capacity fallback, and its flavor selects:
# the item's capacity. GKE's own labels tell a reservation's and Spot's nodes apart, but an
# on-demand pool has none of its own, so a flavor of GKE's labels alone (accelerator, topology)
# also matches the reservation's and Spot's nodes (GKE's DWS and Kueue tutorial gives each
# flavor a pool label of its own). Release-independent: one queue serves many releases' pools.
POOL_CAPACITY_LABEL = "tpu-launcher-capacity"


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


# -- An ordered fallback: `capacity: [reservation:NAME, on-demand, spot, flex-start]` --------
# The first item GKE (or Kueue) can give is what the slice gets. An item is a capacity's name,
# `reservation` (the block's `reservation` names it) or `reservation:NAME` (it names its own).
RESERVATION_ITEM = re.compile(rf"{RESERVATION}:(.+)")
# Who walks the list: GKE's custom ComputeClass (its `priorities`, in order: GKE makes the first
# rule's nodes it can get; "About custom compute classes") or Kueue (a ResourceFlavor per item,
# the ClusterQueue's flavors in that order, the next one tried when one's quota is used up:
# Kueue's "Flavor fungibility"). Kueue is the default where the release names a queue.
COMPUTE_CLASS, KUEUE = "computeclass", "kueue"
FALLBACKS = (COMPUTE_CLASS, KUEUE)
# The pods select a ComputeClass by this node label; GKE's nodes of a class carry it, and the
# pools `gke plan` makes for one are labelled and tainted with it (GKE's "About custom compute
# classes": manually created node pools join a class by this label and a NoSchedule taint).
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"
# The TPU pods' env that carries their capacity's items, in order (one item: the capacity),
# to the host itself (launcher.runtime.cluster.node_capacity) and to what reads the render (`gke
# plan`, `gke queue`, `gke compute-class`): a fallback's pods select none of them.
CAPACITY_ENV = "TPU_CAPACITY"


@dataclass(frozen=True)
class CapacityItem:
    """One item of a slice group's capacity: what, and the reservation it consumes."""

    capacity: Capacity
    reservation: str | None = None

    @property
    def word(self) -> str:
        """As the values (and the pods' CAPACITY_ENV) write it."""
        return _word(self.capacity.name, self.reservation)

    @property
    def preemptible(self) -> bool:
        """Taken back by GKE with a notice (Spot; flex-start at its run duration's end): a
        notice is a preemption. On on-demand or reserved nodes it is a maintenance event or a
        scale-down, and a restart after it a failure."""
        return self.capacity.name in (SPOT, FLEX_START)


def _word(name: str, reservation: str | None) -> str:
    return f"{name}:{reservation}" if reservation else name


def _split(word: str, reservation: str | None = None) -> tuple[str, str | None]:
    """An item's capacity name and reservation: `reservation:NAME` names its own; a bare
    `reservation` takes `reservation` (the block's)."""
    if named := RESERVATION_ITEM.fullmatch(word):
        return RESERVATION, named[1]
    return word, reservation if word == RESERVATION else None


def block_words(block: dict[str, Any]) -> list[str]:
    """A TPU block's capacity items as words, in order, unchecked (one item: a single
    capacity; a bare `reservation` with the block's name)."""
    value = block.get("capacity") or ON_DEMAND
    words = [str(w) for w in (value if isinstance(value, list) else [value])]
    return [_word(*_split(w, block.get("reservation"))) for w in words]


def queued_items(items: list[CapacityItem]) -> list[CapacityItem]:
    """The items as GKE obtains them for Ray workers under a Kueue queue: flex-start as its
    queued provisioning (QUEUED_FLEX_START)."""
    return [CapacityItem(QUEUED_FLEX_START) if i.capacity.name == FLEX_START else i for i in items]


def capacity_items(
    block: dict[str, Any], path: str, generation: str, flex_start: bool
) -> list[CapacityItem]:
    """A TPU block's capacity as an ordered list (one item: a single capacity), checked as
    `capacity_of` checks one."""
    words = block_words(block)
    if not words:
        raise UsageError(f"{path}.capacity", "an empty list", f"--set {path}.capacity=on-demand")
    items = []
    for word in words:
        name, reservation = _split(word)
        capacity = capacity_of(
            {"capacity": name, "reservation": reservation}, path, generation, flex_start
        )
        items.append(CapacityItem(capacity, reservation))
    if len({i.word for i in items}) != len(items):
        raise UsageError(
            f"{path}.capacity",
            f"{[i.word for i in items]} names one item twice",
            "name each capacity once, in the order to try them",
        )
    return items


def parse_items(words: str) -> list[CapacityItem]:
    """The pods' CAPACITY_ENV back into items."""
    items = []
    for word in words.split(","):
        name, reservation = _split(word.strip())
        items.append(CapacityItem(CAPACITIES[name], reservation))
    return items


def items_of_pod(pod: dict[str, Any]) -> list[CapacityItem]:
    """A rendered TPU pod's capacity items, in order ([] where its containers name none);
    flex-start as the pods tolerate it (queued provisioning under a Kueue queue)."""
    for container in pod.get("containers", []):
        for env in container.get("env", []):
            if env.get("name") == CAPACITY_ENV and env.get("value"):
                items = parse_items(env["value"])
                # Flex-start under a Kueue queue: its pods tolerate gke-queued, or, in a
                # fallback Kueue walks (no class selected), the flavor adds it.
                by_kueue = len(items) > 1 and COMPUTE_CLASS_LABEL not in (
                    pod.get("nodeSelector") or {}
                )
                by_queue = by_kueue or any(
                    t.get("key") in QUEUED_FLEX_START.node_labels
                    for t in pod.get("tolerations", [])
                )
                return queued_items(items) if by_queue else items
    return []


def capacity_of_node(labels: dict[str, str]) -> CapacityItem:
    """What capacity a node is, from the labels GKE gives its nodes (the same ones the pods
    select: CAPACITIES, QUEUED_FLEX_START): what a host of a fallback learns it got."""
    if all(labels.get(k) == v for k, v in QUEUED_FLEX_START.node_labels.items()):
        return CapacityItem(CAPACITIES[FLEX_START])
    for capacity in CAPACITIES.values():
        wanted = capacity.node_labels
        if not wanted or not all(k in labels for k in wanted):
            continue
        if any(v != RESERVATION_NAME and labels[k] != v for k, v in wanted.items()):
            continue
        named = [labels[k] for k, v in wanted.items() if v == RESERVATION_NAME]
        reservation = named[0] if named else None
        if reservation and (owner := labels.get(RESERVATION_PROJECT_LABEL)):
            reservation = f"projects/{owner}/reservations/{reservation}"
        return CapacityItem(capacity, reservation)
    return CapacityItem(CAPACITIES[ON_DEMAND])


def fallback_json() -> dict[str, Any]:
    """The chart's copy of a fallback's facts (`capacityFallback`; the schema's enum of who walks
    it is FALLBACKS, written there by ci/schema_enums.py)."""
    return {
        "itemPattern": RESERVATION_ITEM.pattern,
        "computeClassLabel": COMPUTE_CLASS_LABEL,
        "env": CAPACITY_ENV,
    }
