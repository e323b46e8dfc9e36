"""Why a release's job is not running, from the objects that say it (what xpk's users asked for
instead of reading events by hand): Kueue's Workload that is not admitted, pods the scheduler
cannot place (no node of the slice's TPU shape, nodes full, a taint), the node autoscaler's last
word on them (GKE's cluster autoscaler writes NotTriggerScaleUp and FailedScaleUp events on the
pod), images that cannot be pulled, and a slice only partly up. Each reason comes with its fix.

The reading is pure (pods, Workloads and Events as the API server returns them), the fetching
one `kubectl get` per kind."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from launcher.core.tpu.table import GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL

if TYPE_CHECKING:
    from launcher.client.release.helm_release import Release

INSTANCE_LABEL = "app.kubernetes.io/instance"
GROUP_LABEL = "ray.io/group"  # KubeRay: the worker group a pod belongs to
REPLICA_LABEL = "ray.io/worker-group-replica-index"  # KubeRay: the slice (replica) of a pod
NODE_TYPE_LABEL = "ray.io/node-type"  # KubeRay: head or worker
# The cluster autoscaler's event reasons on a pod it could not (or did not) scale up for
# (kubernetes/autoscaler FAQ, "What events are emitted by CA?"), and the one it says when it did.
AUTOSCALER_REFUSED = ("NotTriggerScaleUp", "FailedScaleUp")
AUTOSCALER_SCALING = "TriggeredScaleUp"
IMAGE_PULL = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")


@dataclass(frozen=True)
class Reason:
    what: str
    fix: str

    def lines(self) -> list[str]:
        return [f"  - {self.what}", f"    fix: {self.fix}"]


def kueue_reasons(workloads: Iterable[dict[str, Any]]) -> list[Reason]:
    """A Workload Kueue has not admitted: its QuotaReserved condition says why."""
    found = []
    for w in workloads:
        status = w.get("status") or {}
        conditions = {c["type"]: c for c in status.get("conditions", [])}
        if (conditions.get("Admitted") or {}).get("status") == "True":
            continue
        if (conditions.get("Finished") or {}).get("status") == "True":
            continue
        reserved = conditions.get("QuotaReserved") or {}
        queue = w.get("spec", {}).get("queueName", "?")
        message = reserved.get("message") or "no decision from Kueue yet"
        found.append(
            Reason(
                f"Kueue has not admitted workload {w['metadata']['name']} from queue {queue}: "
                f"{message}",
                "it is admitted, whole, when the queue's ClusterQueue has quota for every "
                "slice: wait for the jobs ahead of it (`kubectl get workloads -n "
                f"{w['metadata'].get('namespace', '?')}`), raise the ClusterQueue's "
                "nominalQuota, or give it a higher kueue.priorityClass",
            )
        )
    return found


TPU = "google.com/tpu"


def _tpu(resources: list[dict[str, Any]], key: str) -> int:
    """A flavor's google.com/tpu `key` (nominalQuota, total) among its resources."""
    return sum(int(str(r.get(key) or 0)) for r in resources if r["name"] == TPU)


def kueue_admissions(
    workloads: Iterable[dict[str, Any]], cluster_queues: Iterable[dict[str, Any]]
) -> list[str]:
    """Where Kueue admitted each Workload's TPU hosts: the flavor (a capacity item of the
    release's fallback: launcher.client.gke.queue), its place in the ClusterQueue's order, and
    why the flavors before it were passed over: their google.com/tpu quota in use."""
    queues = {q["metadata"]["name"]: q for q in cluster_queues}
    lines = []
    for w in workloads:
        admission = (w.get("status") or {}).get("admission") or {}
        flavors = [
            a["flavors"][TPU]
            for a in admission.get("podSetAssignments", [])
            if TPU in a.get("flavors", {})
        ]
        if not flavors:
            continue
        flavor, name = flavors[0], w["metadata"]["name"]
        queue = queues.get(admission.get("clusterQueue", ""))
        if queue is None:  # not readable by this user, or gone
            lines.append(f"capacity: Kueue admitted workload {name} on flavor {flavor}")
            continue
        order = [
            f
            for g in queue["spec"].get("resourceGroups", [])
            if TPU in g.get("coveredResources", [])
            for f in g.get("flavors", [])
        ]
        names = [f["name"] for f in order]
        used = {
            f["name"]: _tpu(f.get("resources", []), "total")
            for f in (queue.get("status") or {}).get("flavorsReservation", [])
        }
        place = names.index(flavor) + 1 if flavor in names else 0
        line = f"capacity: Kueue admitted workload {name} on flavor {flavor}" + (
            f" (choice {place} of {len(names)}: {', '.join(names)})" if place else ""
        )
        passed = []
        for f in order[: max(place - 1, 0)]:
            quota = _tpu(f.get("resources", []), "nominalQuota")
            passed.append(f"{f['name']}: {used.get(f['name'], 0)} of {quota} chips in use")
        if passed:
            line += "; passed over, their quota taken: " + "; ".join(passed)
        lines.append(line)
    return lines


def unschedulable(pod: dict[str, Any]) -> str | None:
    """The scheduler's reason a pod is not placed (its PodScheduled condition), or None."""
    for c in (pod.get("status") or {}).get("conditions", []):
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "unschedulable")
    return None


def _shape(pod: dict[str, Any]) -> str:
    selector = pod.get("spec", {}).get("nodeSelector") or {}
    parts = [
        f"{k}={selector[k]}" for k in (GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL) if k in selector
    ]
    return ", ".join(parts) or "its nodeSelector"


def _scheduling_reason(pods: list[dict[str, Any]], message: str) -> Reason:
    names = ", ".join(sorted(p["metadata"]["name"] for p in pods))
    shape = _shape(pods[0])
    # The scheduler counts each node once, under the first filter it failed: nodes of the
    # shape that are full, then taints, then the rest of the cluster's nodes.
    if "Insufficient google.com/tpu" in message:
        return Reason(
            f"the nodes of this TPU shape ({shape}) are all taken: {len(pods)} pod(s) wait "
            f"({names})",
            "add nodes to the slice's node pool (one node per host), or wait for the jobs on "
            "them to end",
        )
    if "untolerated taint" in message:
        return Reason(
            f"the scheduler found nodes, but a taint they carry is not tolerated: {names}: "
            f"{message}",
            "Spot nodes carry cloud.google.com/gke-spot: set the release's capacity to spot "
            "(the chart adds the toleration), or use on-demand nodes",
        )
    if "didn't match Pod's node affinity/selector" in message:
        return Reason(
            f"no node has this TPU shape ({shape}) for {len(pods)} pod(s): {names}",
            "create the slice's node pool (`tpu-launcher gke plan --values <the release's "
            "values>` prints it), or let GKE create it (node auto-provisioning)",
        )
    return Reason(f"{len(pods)} pod(s) cannot be scheduled ({names}): {message}", "see the message")


def pod_reasons(pods: list[dict[str, Any]], events: Iterable[dict[str, Any]]) -> list[Reason]:
    """What the release's pods say: unschedulable (grouped by the scheduler's message), the
    autoscaler's last word on them, images that cannot be pulled, and a slice partly up."""
    found: list[Reason] = []
    unscheduled: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in pods:
        if pod.get("status", {}).get("phase") == "Pending" and (why := unschedulable(pod)):
            unscheduled[why].append(pod)
    found += [_scheduling_reason(group, message) for message, group in unscheduled.items()]
    found += _autoscaler_reasons(pods, events)
    for pod in pods:
        for status in pod.get("status", {}).get("containerStatuses") or []:
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in IMAGE_PULL:
                found.append(
                    Reason(
                        f"pod {pod['metadata']['name']} cannot pull image {status.get('image')}: "
                        f"{waiting.get('message') or waiting['reason']}",
                        "check the tag exists (`tpu-launcher image` builds and pushes it) and "
                        "that the node's service account can read the repository "
                        "(roles/artifactregistry.reader)",
                    )
                )
    found += _partial_slices(pods)
    return found


def _autoscaler_reasons(
    pods: list[dict[str, Any]], events: Iterable[dict[str, Any]]
) -> list[Reason]:
    """The cluster autoscaler's last event on each pending pod, when it refused to scale up."""
    pending = {p["metadata"]["name"] for p in pods if p.get("status", {}).get("phase") == "Pending"}
    last: dict[str, dict[str, Any]] = {}
    for e in sorted(events, key=_event_time):  # the last word on each pod wins
        pod = str((e.get("involvedObject") or {}).get("name"))
        if e.get("reason") in (*AUTOSCALER_REFUSED, AUTOSCALER_SCALING) and pod in pending:
            last[pod] = e
    said: dict[str, list[str]] = defaultdict(list)
    for pod, e in last.items():
        if e["reason"] in AUTOSCALER_REFUSED:
            said[f"{e['reason']}: {e.get('message', '')}"].append(pod)
    return [
        Reason(
            f"the node autoscaler did not add nodes for {', '.join(sorted(names))}: {message}",
            "GKE's own words: a quota or a stockout (try another zone, a reservation, or "
            "flex-start), a node pool at its maximum size, or no pool of this shape",
        )
        for message, names in said.items()
    ]


def _event_time(event: dict[str, Any]) -> str:
    """When an event last happened (RFC 3339 text sorts in time order)."""
    return str(event.get("lastTimestamp") or event.get("eventTime") or "")


def _partial_slices(pods: list[dict[str, Any]]) -> list[Reason]:
    """A multi-host slice (one worker group replica; the whole group where KubeRay labels no
    replica) with some hosts running and some not: the running ones hold their TPUs and wait."""
    slices: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if labels.get(NODE_TYPE_LABEL) == "worker":
            slices[(labels.get(GROUP_LABEL, "?"), labels.get(REPLICA_LABEL, ""))].append(pod)
    found = []
    for (group, replica), hosts in sorted(slices.items()):
        running = sum(h.get("status", {}).get("phase") == "Running" for h in hosts)
        if 0 < running < len(hosts):
            which = (
                f"slice {replica} of worker group {group}" if replica else f"worker group {group}"
            )
            found.append(
                Reason(
                    f"{which} is partly up: {running} of {len(hosts)} hosts running; the "
                    "running ones hold their TPUs and wait",
                    "the rest need nodes of the same shape (see above); a slice trains only whole",
                )
            )
    return found


@dataclass(frozen=True)
class ReleaseState:
    reasons: list[Reason]
    head_running: bool  # False: there is no Ray to ask yet
    admissions: list[str] = field(default_factory=list)  # kueue_admissions: where it landed

    def print(self) -> None:
        for line in self.admissions:
            print(line)
        if self.reasons:
            print("why it is not running:")
            for reason in self.reasons:
                print("\n".join(reason.lines()))


def why_not_running(release: Release) -> ReleaseState:
    """The reasons the release's objects give (none when every pod runs), and whether its Ray
    head runs."""
    from launcher.client.release.helm_release import get_items

    namespace = release.namespace
    selector = f"{INSTANCE_LABEL}={release.name}"
    pods = get_items(namespace, "pods", "-l", selector)
    head_running = any(
        (p["metadata"].get("labels") or {}).get(NODE_TYPE_LABEL) == "head"
        and p.get("status", {}).get("phase") == "Running"
        for p in pods
    )
    events = get_items(namespace, "events")
    owners = release.owners()
    workloads = [
        w
        for w in get_items(namespace, "workloads.kueue.x-k8s.io", optional=True)
        if any(o.get("name") in owners for o in w["metadata"].get("ownerReferences") or [])
    ]
    admitted = [w for w in workloads if (w.get("status") or {}).get("admission")]
    queues = get_items(namespace, "clusterqueues.kueue.x-k8s.io", optional=True) if admitted else []
    return ReleaseState(
        kueue_reasons(workloads) + pod_reasons(pods, events),
        head_running,
        kueue_admissions(admitted, queues),
    )
