"""torchrun's per-host variables on the local slice, as a TPU slice's hosts give them.

Ray Train counts a node's workers by IP (ray.train.v2 WorkerGroup._assign_worker_ranks): on a
TPU slice each host is its own machine, so each host's workers read LOCAL_RANK 0..3 and its own
NODE_RANK. The local slice's simulated hosts share one machine, so Ray gives every worker of
every host one node: LOCAL_RANK 0..7, NODE_RANK 0, and a script's per-host work (rank 0 of each
host writes, a group per host) would run differently here than on TPU. Here each worker's host is
known from the env the slice gives it (TPU_NAME, TPU_WORKER_ID: the webhook's on GKE, the local
cluster's here), and the variables are set from it before the script runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

Host = tuple[str, int]  # (the slice's TPU_NAME, the host's TPU_WORKER_ID)

# torchrun's names (torch.distributed.run): GROUP_RANK is the node's rank, as NODE_RANK.
PER_HOST_VARS = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK")


def this_host(env: dict[str, str] | os._Environ[str] = os.environ) -> Host:
    worker = env.get("TPU_WORKER_ID", "")
    return env.get("TPU_NAME", ""), int(worker) if worker.isdigit() else 0


def per_host_env(hosts: Sequence[Host], rank: int) -> dict[str, str]:
    """The per-host variables of `rank`, where `hosts[r]` is rank r's host: its local rank
    among its host's workers (by rank), their number, and its host's place among the slices'
    hosts (by slice, then worker id: node 0 is slice 0's host 0)."""
    mine = [r for r, host in enumerate(hosts) if host == hosts[rank]]
    node = sorted(set(hosts)).index(hosts[rank])
    return {
        "LOCAL_RANK": str(mine.index(rank)),
        "LOCAL_WORLD_SIZE": str(len(mine)),
        "NODE_RANK": str(node),
        "GROUP_RANK": str(node),
    }


def interleaved(hosts: Sequence[Host]) -> bool:
    """Whether some host's ranks are not one contiguous run (torchrun's always are)."""
    seen: list[Host] = []
    for host in hosts:
        if not seen or seen[-1] != host:
            if host in seen:
                return True
            seen.append(host)
    return False


def set_per_host_env() -> str | None:
    """On the local slice's simulated hosts: the per-host variables set on this worker (its
    process group made already, by Ray Train); a note to say, where the ranks of a host are not
    contiguous (Ray orders them; its TPU sort keeps one slice's hosts together, not one host's)."""
    import torch.distributed as dist

    hosts: list[Host] = [("", 0)] * dist.get_world_size()
    dist.all_gather_object(hosts, this_host())
    os.environ.update(per_host_env(hosts, dist.get_rank()))
    if not interleaved(hosts):
        return None
    by_host = {h: [r for r, x in enumerate(hosts) if x == h] for h in sorted(set(hosts))}
    said = "; ".join(
        f"node {n}: ranks {', '.join(map(str, r))}" for n, r in enumerate(by_host.values())
    )
    return (
        f"launcher: each simulated host's workers read LOCAL_RANK, LOCAL_WORLD_SIZE and "
        f"NODE_RANK as a TPU host's do; their global ranks are Ray's, not one run per host ({said})"
    )
