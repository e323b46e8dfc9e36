"""TorchTPU's slice variables, set on every worker of a PyTorch job on TPU before its process
group (`tpu_dist`) is made.

TorchTPU builds a slice from TORCH_TPU_TOPOLOGY (the slice's physical mesh, "4,4,1") and
TORCH_TPU_SLICEBUILDER_ADDRESSES (one host:port per rank, the same list on every rank of the
slice), and nothing on GKE sets them:
- the pinned torch-tpu says so (0.2.0, torch_tpu/_internal/distributed/distributed.py: "Nothing
  upstream populates these, so TorchTPU has to own the step");
- the KubeRay TPU webhook sets neither (ai-on-gke/kuberay-tpu-webhook main.go at ef658db and at
  v1.3.5: TPU_WORKER_HOSTNAMES on a multi-host slice, TPU_WORKER_ID, TPU_NAME, and on Ironwood
  TPU_PROCESS_ADDRESSES);
- nor does Ray Train's tpu_dist setup (ray.train.torch.config, Ray 2.60.0).

TorchTPU's own `set_tpu_launch_env()` derives them for torchrun, once per host, from
TPU_WORKER_HOSTNAMES. Ray Train starts one worker per chip, so the driver derives them here by
the same rule from what the webhook set on each worker, in Ray's rank order:
- a multi-host slice: `<the host's name in TPU_WORKER_HOSTNAMES>:<8070 + the rank's index on its
  host>` (8070: TORCH_TPU_BASE_PORT's default), the list TorchTPU makes where the ranks run host
  by host in the webhook's order;
- a slice of one host: `localhost:<a port free on it>` per chip, as TorchTPU picks them.
A variable the pod sets already is kept, as TorchTPU keeps it (an operator may pin one).
tests/image/test_torch_tpu_env.py compares these with what the pinned torch-tpu derives itself.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from launcher.runtime.cluster.check import WEBHOOK_FIX

TOPOLOGY, ADDRESSES = "TORCH_TPU_TOPOLOGY", "TORCH_TPU_SLICEBUILDER_ADDRESSES"
BASE_PORT = 8070  # torch-tpu 0.2.0: TORCH_TPU_BASE_PORT's default
LOCALHOST = "localhost"


@dataclass(frozen=True)
class ChipWorker:
    """What one worker's pod says of its place: its slice, its host's name there, its node."""

    slice: str  # TPU_NAME (the webhook's `<group>-<replica>`)
    host: str  # its host's name in TPU_WORKER_HOSTNAMES; localhost where the slice has none
    node: str  # the Ray node it runs on (its pod's IP)


def this_worker(node: str, env: Mapping[str, str] = os.environ) -> ChipWorker:
    names = [h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h]
    slice_name = env.get("TPU_NAME") or ",".join(names)
    if len(names) <= 1:
        return ChipWorker(slice_name, LOCALHOST, node)
    worker = env.get("TPU_WORKER_ID", "")
    if not worker.isdigit() or int(worker) >= len(names):
        raise RuntimeError(
            f"this TPU worker's TPU_WORKER_ID is {worker!r}, not the index of one of its "
            f"slice's {len(names)} TPU_WORKER_HOSTNAMES: the KubeRay TPU webhook sets both; "
            "check that no pod template of the release sets either"
        )
    return ChipWorker(slice_name, names[int(worker)], node)


def mesh(topology: str) -> str:
    """A slice's topology ("4x4", "2x2x2") in TorchTPU's form: three sizes, comma-separated
    (its parser, torch-tpu's _parse_topology, pads to three and reads x or , alike)."""
    sizes = topology.lower().split("x")
    return ",".join(sizes + ["1"] * (3 - len(sizes)))


def one_host_slices(workers: Sequence[ChipWorker]) -> dict[str, list[int]]:
    """The ranks of each slice whose workers name no host (one host: ports picked on it),
    refusing a slice whose workers run on several nodes without the webhook's hostnames."""
    ranks: dict[str, list[int]] = {}
    for rank, worker in enumerate(workers):
        if worker.host == LOCALHOST:
            ranks.setdefault(worker.slice, []).append(rank)
    for name, mine in ranks.items():
        nodes = sorted({workers[r].node for r in mine})
        if len(nodes) > 1:
            raise RuntimeError(
                f"slice {name or '(unnamed)'}'s workers run on {len(nodes)} hosts "
                f"({', '.join(nodes[:3])}) but have no TPU_WORKER_HOSTNAMES: the KubeRay TPU "
                f"webhook did not mutate them, and TorchTPU cannot build the slice; {WEBHOOK_FIX}"
            )
    return ranks


def slice_env(
    workers: Sequence[ChipWorker], topology: str, ports: Mapping[str, Sequence[int]]
) -> list[dict[str, str]]:
    """TorchTPU's variables for each rank (`workers[r]` is rank r's worker); `ports[slice]`:
    the free ports picked on a one-host slice's host, one per rank of it."""
    lists: dict[str, list[str]] = {}
    per_host: dict[tuple[str, str], int] = {}  # (slice, host): its ranks so far
    picked = {name: iter(p) for name, p in ports.items()}
    for worker in workers:
        if worker.host == LOCALHOST:
            address = f"{LOCALHOST}:{next(picked[worker.slice])}"
        else:
            index = per_host.get((worker.slice, worker.host), 0)
            per_host[(worker.slice, worker.host)] = index + 1
            address = f"{worker.host}:{BASE_PORT + index}"
        lists.setdefault(worker.slice, []).append(address)
    return [{TOPOLOGY: mesh(topology), ADDRESSES: ",".join(lists[w.slice])} for w in workers]


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on this host now (TorchTPU's portpicker does the same)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def set_unless_set(env: Mapping[str, str]) -> None:
    """On a worker: TorchTPU's variables, each unless its pod sets it already."""
    for name, value in env.items():
        os.environ.setdefault(name, value)


def describe(env: Mapping[str, str]) -> str:
    addresses = env[ADDRESSES].split(",")
    return (
        f"launcher: TorchTPU's slice for tpu_dist: {TOPOLOGY}={env[TOPOLOGY]}, "
        f"{len(addresses)} slice builder addresses per slice ({addresses[0]}, ...)"
    )
