"""`tpu-launcher local preempt`: what GKE does to a TPU host it takes back, done to the local
cluster's simulated hosts: the notice (Ray's drain of the node, reason PREEMPTION, with a deadline:
what the chart's preStop hook sends), then at the deadline the host's processes are killed, and the
host comes back (the node pool's capacity returns) unless told to stay down."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from launcher.client.commands import run
from launcher.client.local import cluster as local_cluster
from launcher.client.local import nodes as local_nodes
from launcher.client.local.instance import local_instance
from launcher.core.errors import UsageError
from launcher.core.tpu.preemption import DRAIN_REASON, drain_args


@dataclass(frozen=True)
class Preemption:
    slice_index: int | None = None
    host: int | None = None  # index among the cluster's simulated hosts
    notice_s: float = 30.0
    stay_down: bool = False


def _targets(p: Preemption) -> tuple[dict, list[tuple[int, dict]]]:
    if (p.slice_index is None) == (p.host is None):
        raise UsageError(
            "preempt",
            "name one slice or one host",
            "tpu-launcher local preempt --slice 0 (or --host 1)",
        )
    if p.slice_index is not None:
        return local_cluster.slice_hosts(p.slice_index)
    record, _ = local_cluster.slice_hosts(0)
    nodes, host = record["nodes"], p.host
    assert host is not None
    if not 0 <= host < len(nodes):
        raise UsageError(
            "host",
            f"the local cluster has no host {host} (it has {len(nodes)})",
            f"pass --host 0 .. {len(nodes) - 1}",
        )
    return record, [(host, nodes[host])]


def preempt(p: Preemption) -> None:
    record, hosts = _targets(p)
    names = {node["name"] for _, node in hosts}
    ids = {
        n["node_name"]: n["node_id"]
        for n in local_nodes.alive_nodes()
        if n.get("node_name") in names
    }
    if missing := names - set(ids):
        raise UsageError(
            "preempt",
            f"host(s) {', '.join(sorted(missing))} are not running",
            "start them again: tpu-launcher local slice-up N",
        )
    told = time.monotonic()
    for name in sorted(names):
        run(
            f"drain {name}",
            drain_args(
                local_instance().head_address,
                ids[name],
                p.notice_s,
                "tpu-launcher local preempt (a simulated reclaim)",
            ),
            env={**os.environ, **local_cluster.TOKEN_AUTH},
            capture=True,
        )
    print(
        f"notice: Ray drained {', '.join(sorted(names))} ({DRAIN_REASON}), "
        f"{p.notice_s:g} s to the deadline"
    )
    time.sleep(max(0.0, p.notice_s - (time.monotonic() - told)))
    killed = local_nodes.kill_hosts(names)
    print(f"deadline: killed {killed} process(es) of {', '.join(sorted(names))}")
    # A drained host whose work ended exits by itself; either way it must be gone from Ray
    # before its replacement registers under the same name.
    local_nodes.wait_until_gone(names, "preempt")
    if p.stay_down:
        return
    bucket = Path(record["bucket"])
    for index, node in hosts:
        local_cluster.start_host(index, node, bucket, record["object_store_mb"], False)
    print(f"back: {', '.join(sorted(names))} joined the local cluster again")
