"""The node pools a release needs, as gke plan steps: a CPU pool for its pods without TPUs, and
per TPU worker group its slices' pools (one per multi-host slice), each with the flags GKE's
guides give for its generation and the capacity it is obtained by; and the cluster's pools that
lack the GKE metadata server, named, or moved when asked.
"""

from __future__ import annotations

import re

from launcher.client.gke.release import CpuPool, NodePool
from launcher.client.gke.steps import Check, Step, gcloud, location_flags
from launcher.client.gke.target import GkeTarget
from launcher.client.workspace import GKE_FILES
from launcher.core.errors import UsageError
from launcher.core.tpu.capacity import (
    AUTOSCALED_FROM_ZERO,
    COMPUTE_CLASS_LABEL,
    FLEX_START,
    POOL_CAPACITY_LABEL,
    RESERVATION_NAME,
    SPOT,
)
from launcher.core.tpu.preemption import (
    SPOT_CRITICAL_PODS_S,
    SPOT_POD_SHUTDOWN_S,
    SPOT_SHUTDOWN_MAX_S,
)
from launcher.core.tpu.table import FLEX_START_ZONES_SOURCE, ZONES_SOURCE

# GKE node pool names: lowercase letters, digits and hyphens, a letter first, at most 40.
POOL_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")


# What a pool's create flags make, as the API's NodePool shows it (a `list --filter` term each,
# and the words for it): GKE changes none of these on an existing pool, so a pool of the
# release's name made otherwise (another slice or capacity, an older release) would keep the
# pods Pending for ever. Fields: GKE API's NodePool (config.machineType, config.spot,
# config.flexStart, config.reservationAffinity, placementPolicy, queuedProvisioning).
_VALUED = {
    "--machine-type": ("config.machineType={}", "machine {}"),
    "--tpu-topology": ("placementPolicy.tpuTopology={}", "topology {}"),
    "--placement-policy": ("placementPolicy.policyName={}", "workload policy {}"),
    "--reservation": ("config.reservationAffinity.values:{}", "reservation {}"),
}
_SWITCHES = {
    "--spot": ("config.spot=true", "Spot"),
    "--flex-start": ("config.flexStart=true", "flex-start"),
    "--enable-queued-provisioning": ("queuedProvisioning.enabled=true", "queued provisioning"),
}
SHOWN = "value(config.machineType,placementPolicy.tpuTopology,config.spot,config.flexStart)"


def _shape(flags: list[str]) -> tuple[list[str], list[str]]:
    """(filter terms, words) of what the create flags make."""
    terms, words = [], []
    for flag in flags:
        key, _, value = flag.partition("=")
        if key in _VALUED:
            terms.append(_VALUED[key][0].format(value))
            words.append(_VALUED[key][1].format(value))
    for switch, (term, word) in _SWITCHES.items():
        terms.append(term if switch in flags else f"NOT {term}")
        words += [word] if switch in flags else []
    if not any(f.partition("=")[0] in (*_SWITCHES, "--reservation") for f in flags):
        words.append("on demand")
    return terms, words


def _pool_create(
    name: str,
    target: GkeTarget,
    flags: list[str],
    what: str,
    also: list[tuple[str, str]] | None = None,
) -> Step:
    if not POOL_NAME.match(name):
        raise UsageError(
            "--release",
            f"node pool name {name!r} is not a GKE node pool name (a letter first, "
            "lowercase letters, digits and hyphens, at most 40)",
            "use a shorter release name",
        )
    where = [f"--cluster={target.cluster}", *location_flags(target)]
    describe = gcloud("container", "node-pools", "describe", name, *where)
    delete = " ".join(gcloud("container", "node-pools", "delete", name, *where))
    terms, words = _shape(flags)
    for term, word in also or []:  # (filter term, words) the flags alone do not show
        terms.append(term)
        words.append(word)
    # gcloud's `values:R` is a word match (`my-res` matches a pool bound to `my-res-2`): the
    # reservation is then compared whole, as the pool's list prints it.
    reservation = next((f.partition("=")[2] for f in flags if f.startswith("--reservation=")), "")
    shown = "value(name,config.reservationAffinity.values)" if reservation else "value(name)"
    same = gcloud(
        "container", "node-pools", "list", *where,
        f"--filter={' AND '.join([f'name={name}', *terms])}", f"--format={shown}",
    )  # fmt: skip
    return Step(
        what,
        gcloud("container", "node-pools", "create", name, *where, *flags),
        done_if=Check(describe),
        same_as=Check(same, output=f"{name}\t{reservation}" if reservation else name),
        wanted=", ".join(words),
        shown_by=[*describe, f"--format={SHOWN}"],
        mismatch_fix=f"delete it (`{delete}`: GKE never changes a pool's machine, topology "
        "or capacity), then run again; or give this release another --release name",
    )


def _pools_lacking_metadata(target: GkeTarget) -> list[str]:
    """Lists the cluster's node pools without the GKE metadata server (made before Workload
    Identity): a release pod placed there cannot mount the bucket."""
    return gcloud(
        "container",
        "node-pools",
        "list",
        f"--cluster={target.cluster}",
        *location_flags(target),
        "--filter=NOT config.workloadMetadataConfig.mode=GKE_METADATA",
        "--format=value(name)",
    )


def metadata_check(target: GkeTarget) -> Step:
    """Moving a pool to the metadata server recreates its nodes (running pods and slices
    restart), so gke up moves none unasked (xpk asks too): it stops and names them."""
    update = gcloud(
        "container", "node-pools", "update", "POOL", f"--cluster={target.cluster}",
        *location_flags(target), "--workload-metadata=GKE_METADATA",
    )  # fmt: skip
    return Step(
        "every node pool of the cluster uses the GKE metadata server (Workload Identity: else "
        "pods placed there cannot mount the bucket)",
        [],
        done_if=Check(_pools_lacking_metadata(target), output=""),
        required=True,
        mismatch_fix="moving a pool recreates its nodes, running pods and slices included: do "
        f"it when they are idle (`{' '.join(update)}`), or run again with "
        "--migrate-node-metadata to let gke up move them",
    )


def metadata_migration(target: GkeTarget) -> Step:
    """As --migrate-node-metadata asks: every pool lacking it moved (after Workload Identity)."""
    return Step(
        "node pools made before Workload Identity: to the GKE metadata server (else their "
        "pods cannot mount the bucket; their nodes are recreated, as --migrate-node-metadata "
        "asked)",
        gcloud(
            "container",
            "node-pools",
            "update",
            "{item}",
            f"--cluster={target.cluster}",
            *location_flags(target),
            "--workload-metadata=GKE_METADATA",
        ),
        for_each=_pools_lacking_metadata(target),
    )


def cpu_pool_step(pool: CpuPool, target: GkeTarget) -> Step:
    return _pool_create(
        pool.name,
        target,
        [
            f"--node-locations={target.system_zone}",
            f"--machine-type={pool.machine}",
            f"--num-nodes={pool.nodes}",
            "--workload-metadata=GKE_METADATA",
        ],
        f"node pool {pool.name}: {pool.nodes} x {pool.machine} for the release's {pool.pods} "
        f"pod{'s' if pool.pods != 1 else ''} without TPUs",
    )


def pool_names(pool: NodePool) -> list[str]:
    """A multi-host slice is a whole node pool: one pool per slice; single-host slices share
    one pool, a node each."""
    if pool.slices.shape.multi_host:
        return [f"{pool.name}-{i}" for i in range(pool.slices.num_slices)]
    return [pool.name]


def workload_policy(pool: NodePool) -> str | None:
    """The workload policy that places a multi-host pool of a generation placed by one (tpu7x):
    one per release pool, named after it."""
    shape = pool.slices.shape
    return (
        f"{pool.name}-placement" if shape.generation.workload_policy and shape.multi_host else None
    )


def resource_policies(verb: str, *words: str, target: GkeTarget) -> list[str]:
    return gcloud(
        "compute",
        "resource-policies",
        verb,
        *words,
        f"--region={target.region}",
        f"--project={target.project}",
    )


def require_offered(pool: NodePool, target: GkeTarget) -> None:
    """Refuses, before anything is made, a zone that does not offer the slice's generation (on
    flex-start: on flex-start, a shorter list): the cluster and its CPU pool would bill and the
    TPU pool fail last."""
    gen, zone = pool.slices.shape.generation, target.zone
    flex = pool.capacity.name == FLEX_START
    zones, source = (
        (gen.flex_start_zones, FLEX_START_ZONES_SOURCE) if flex else (gen.zones, ZONES_SOURCE)
    )
    if zone.startswith("${") or zone in zones or zone == target.allow_zone:
        return
    where = "--node-zone" if target.node_zone else "--location"
    offered = f"lists {', '.join(zones)}" if zones else "lists no zone for it"
    how = " on flex-start" if flex else ""
    raise UsageError(
        where,
        f"TPU {gen.name} ({pool.slices.shape.name}) is not offered{how} in {zone}: {source} "
        f"{offered}",
        (
            f"{where} one of those (LOCATION=<zone>, or NODE_ZONE for a regional cluster in that "
            "region); "
            if zones
            else "another capacity (--capacity), or "
        )
        + f"if GKE offers {gen.name}{how} in {zone} now, --allow-zone {zone}",
    )


SYSTEM_CONFIGS = GKE_FILES  # where a node pool's system configuration is written


def spot_shutdown(pool: NodePool) -> int | None:
    """The node shutdown a Spot pool's nodes need so that its pods get their grace period of a
    reclaim's notice (SPOT_POD_SHUTDOWN_S by default), or None where the default covers it.
    GKE takes 0, 30 or 120 s (launcher.core.tpu.preemption): an extended pool takes 120, and its
    pods get up to 105 of it, each as long as its own grace period."""
    grace = pool.grace_seconds
    if pool.capacity.name != SPOT or grace is None or grace <= SPOT_POD_SHUTDOWN_S:
        return None
    longest = SPOT_SHUTDOWN_MAX_S - SPOT_CRITICAL_PODS_S
    if grace > longest:
        raise UsageError(
            "ray.worker.terminationGracePeriodSeconds",
            f"{grace}s to save on a Spot VM's reclaim, where GKE gives pods at most {longest}s "
            f"(its {SPOT_SHUTDOWN_MAX_S}s node shutdown less {SPOT_CRITICAL_PODS_S}s for system "
            "pods; GKE: Spot VMs)",
            f"--set ray.worker.terminationGracePeriodSeconds={longest} (preflight says what the "
            "save needs), or a capacity without reclaims (on-demand, a reservation)",
        )
    return SPOT_SHUTDOWN_MAX_S


def _system_config_step(name: str, shutdown: int, grace: int) -> tuple[Step, str]:
    path = f"{SYSTEM_CONFIGS}/{name}-system-config.yaml"
    content = (
        "kubeletConfig:\n"
        f"  shutdownGracePeriodSeconds: {shutdown}\n"
        f"  shutdownGracePeriodCriticalPodsSeconds: {SPOT_CRITICAL_PODS_S}\n"
    )
    what = (
        f"node pool {name}'s shutdown on a Spot reclaim: {shutdown}s, so its pods get their "
        f"{grace}s grace period to save (up to {shutdown - SPOT_CRITICAL_PODS_S}s; GKE's "
        f"default gives them {SPOT_POD_SHUTDOWN_S}s)"
    )
    return Step(what, [], writes=(path, content)), path


def _fallback_place(pool: NodePool) -> str:
    """Where a fallback's pool stands in its list, and who walks it."""
    words = [i.word for i in pool.fallback]
    mine = next(
        n
        for n, i in enumerate(pool.fallback, 1)
        if i.capacity.name == pool.capacity.name and i.reservation == pool.reservation
    )
    who = f"ComputeClass {pool.compute_class}" if pool.compute_class else "the Kueue queue"
    return f"choice {mine} of {len(words)} ({', '.join(words)}; {who} picks)"


def tpu_pool_steps(pool: NodePool, target: GkeTarget) -> list[Step]:
    shape = pool.slices.shape
    steps = []
    flags = [
        f"--node-locations={target.zone}",
        f"--machine-type={shape.machine_type}",
        *shape.generation.node_pool_flags,
        "--workload-metadata=GKE_METADATA",
    ]
    # How the TPUs are obtained, as the release's pods ask (ray.worker.tpu.capacity).
    flags += [f.replace(RESERVATION_NAME, pool.reservation or "") for f in pool.capacity.pool_flags]
    if pool.compute_class:
        # A ComputeClass's pool made by hand joins the class by its label and taint (GKE's
        # "About custom compute classes"); the class's priorities say which pool scales first.
        joins = f"{COMPUTE_CLASS_LABEL}={pool.compute_class}"
        flags += [f"--node-labels={joins}", f"--node-taints={joins}:NoSchedule"]
    also: list[tuple[str, str]] = []
    if pool.fallback and not pool.compute_class:
        # Kueue's flavor for this item selects its pool by this label (POOL_CAPACITY_LABEL).
        label = f"{POOL_CAPACITY_LABEL}={pool.capacity.name}"
        flags.append(f"--node-labels={label}")
        also.append((f"config.labels.{label}", f"label {label}"))
    if shutdown := spot_shutdown(pool):
        step, path = _system_config_step(pool.name, shutdown, pool.grace_seconds or 0)
        steps.append(step)
        flags.append(f"--system-config-from-file={path}")
        also.append(
            (
                f"config.kubeletConfig.shutdownGracePeriodSeconds={shutdown}",
                f"{shutdown}s shutdown on a reclaim",
            )
        )
    if pool.autoscaled and "--enable-autoscaling" not in flags:
        flags += AUTOSCALED_FROM_ZERO
    # An autoscaled pool starts empty (--num-nodes=0): the slice's hosts are its ceiling.
    nodes = "--total-max-nodes" if pool.autoscaled else "--num-nodes"
    names = pool_names(pool)
    if policy := workload_policy(pool):
        # Ironwood: a HIGH_THROUGHPUT workload policy names the topology and keeps the slice's
        # hosts together; GKE takes it instead of --tpu-topology (GKE: About Ironwood (TPU7x)).
        steps.append(
            Step(
                f"workload policy {policy}: {shape.name}'s topology {shape.topology}, hosts "
                "placed together (Ironwood pools take it instead of --tpu-topology)",
                resource_policies(
                    "create",
                    "workload-policy",
                    policy,
                    "--type=HIGH_THROUGHPUT",
                    f"--accelerator-topology={shape.topology}",
                    target=target,
                ),
                done_if=Check(resource_policies("describe", policy, target=target)),
            )
        )
        flags += [f"--placement-policy={policy}", f"{nodes}={shape.hosts}"]
    elif shape.multi_host:
        # COMPACT placement keeps a slice's hosts in one ICI domain, as xpk creates them.
        flags += [
            f"--tpu-topology={shape.topology}",
            f"{nodes}={shape.hosts}",
            "--placement-type=COMPACT",
        ]
    else:  # GKE refuses --tpu-topology on single-host pools
        flags.append(f"{nodes}={pool.slices.num_slices}")
    return steps + [
        _pool_create(
            name,
            target,
            flags,
            f"node pool {name}: {pool.slices.describe()}"
            + (f", slice {i} of {len(names)}" if len(names) > 1 else "")
            + (f", {_fallback_place(pool)}" if pool.fallback else "")
            + (", empty until a job's pods ask for it" if pool.autoscaled else ""),
            also,
        )
        for i, name in enumerate(names, 1)
    ]
