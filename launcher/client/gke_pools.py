"""The node pools a release needs, as gke plan steps: a CPU pool for its pods without TPUs, and
per TPU worker group its slices' pools (one per multi-host slice), each with the flags GKE's
guides give for its generation and the capacity it is obtained by.
"""

from __future__ import annotations

import re

from launcher.client.gke_release import CpuPool, NodePool
from launcher.client.gke_steps import Check, Step, gcloud, location_flags
from launcher.client.gke_target import GkeTarget
from launcher.core.capacity import AUTOSCALED_FROM_ZERO, RESERVATION_NAME
from launcher.core.errors import UsageError

# GKE node pool names: lowercase letters, digits and hyphens, a letter first, at most 40.
POOL_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")


def _pool_create(name: str, target: GkeTarget, flags: list[str], what: str) -> Step:
    if not POOL_NAME.match(name):
        raise UsageError(
            "--release",
            f"node pool name {name!r} is not a GKE node pool name (a letter first, "
            "lowercase letters, digits and hyphens, at most 40)",
            "use a shorter release name",
        )
    where = [f"--cluster={target.cluster}", *location_flags(target)]
    describe = gcloud("container", "node-pools", "describe", name, *where)
    machine = next(f.partition("=")[2] for f in flags if f.startswith("--machine-type="))
    delete = " ".join(gcloud("container", "node-pools", "delete", name, *where))
    return Step(
        what,
        gcloud("container", "node-pools", "create", name, *where, *flags),
        done_if=Check(describe),
        # A pool of that name made for another machine (another slice, an older release)
        # would keep the pods Pending: GKE never changes a pool's machine type.
        same_as=Check([*describe, "--format=value(config.machineType)"], output=machine),
        mismatch_fix=f"delete it (`{delete}`: GKE never changes a pool's machine type), then "
        "run again; or give this release another --release name",
    )


def cpu_pool_step(pool: CpuPool, target: GkeTarget) -> Step:
    return _pool_create(
        pool.name,
        target,
        [
            f"--node-locations={target.zone}",
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
            + (", empty until a job's pods ask for it" if pool.autoscaled else ""),
        )
        for i, name in enumerate(names, 1)
    ]
