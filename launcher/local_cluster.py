"""A real Ray cluster on 127.0.0.1 that looks to Ray Train like a TPU slice.

One head node, then one Ray node per simulated host. Each host advertises the resources and
labels KubeRay and the GKE TPU webhook give a real TPU host (TPU chips, the slice name, the
worker id, the topology, the pod type, the `TPU-<pod type>-head` resource on worker 0), so
JaxTrainer takes Ray's own TPU path: slice reservation, gang scheduling, jax.distributed. Each
host's JAX sees its chips as CPU devices. A CPU-only slice (no TPU resources) is offered too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from launcher.commands import run
from launcher.errors import UsageError, exit_with
from launcher.slices import (
    LABEL_ACCELERATOR,
    LABEL_POD_TYPE,
    LABEL_SLICE,
    LABEL_TOPOLOGY,
    LABEL_WORKER_ID,
)
from launcher.tpu_table import slice_shape

# Ray swaps 127.0.0.1 for the machine's network address; another loopback address it keeps,
# so the whole cluster stays on loopback.
NODE_IP = "127.0.0.2"
HEAD_PORT = 6379
DASHBOARD_PORT = 8265
DASHBOARD_ADDRESS = f"http://127.0.0.1:{DASHBOARD_PORT}"
# Each node on one machine needs its own agent ports.
_PORT_BASE = 52400
DEFAULT_ACCELERATOR = "v5p"  # v5p-16: 2 hosts x 4 chips, the smallest real multi-host slice
DEFAULT_TOPOLOGY = "2x2x2"


def _node_ports(index: int) -> list[str]:
    base = _PORT_BASE + 10 * index
    return [
        f"--dashboard-agent-listen-port={base}",
        f"--dashboard-agent-grpc-port={base + 1}",
        f"--metrics-export-port={base + 2}",
        f"--runtime-env-agent-port={base + 3}",
    ]


def _env(extra: dict[str, str]) -> dict[str, str]:
    # Jobs run `python -m launcher.train`: put this environment's python first on PATH.
    # Token auth is on, as in the chart: anyone who reaches a dashboard can run code.
    bin_dir = str(Path(sys.executable).parent)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "RAY_AUTH_MODE": "token", **extra}


def host_nodes(accelerator: str | None, topology: str | None, num_slices: int,
               cpu_hosts: int | None, cpu_devices: int | None) -> list[dict]:
    """The `ray start` resources, labels and env of each simulated host."""
    nodes = []
    if cpu_hosts:
        env = {"JAX_PLATFORMS": "cpu",
               "XLA_FLAGS": f"--xla_force_host_platform_device_count={cpu_devices}"}
        return [{"resources": {}, "labels": {}, "env": env} for _ in range(cpu_hosts)]
    shape = slice_shape(accelerator or DEFAULT_ACCELERATOR, topology or DEFAULT_TOPOLOGY)
    for s in range(num_slices):
        for host in range(shape.hosts):
            resources = {"TPU": shape.chips_per_host,
                         f"accelerator_type:{shape.generation.ray_accelerator_type}": 1}
            if host == 0:
                resources[f"TPU-{shape.pod_type}-head"] = 1
            nodes.append({
                "resources": resources,
                "labels": {
                    LABEL_SLICE: f"local-slice-{s}",
                    LABEL_WORKER_ID: str(host),
                    LABEL_TOPOLOGY: shape.topology,
                    LABEL_ACCELERATOR: shape.generation.ray_accelerator_type,
                    LABEL_POD_TYPE: shape.pod_type,
                },
                # What the GKE TPU webhook injects into a TPU pod; Ray reads the slice name here.
                "env": {
                    "TPU_NAME": f"local-slice-{s}",
                    "TPU_WORKER_ID": str(host),
                    "JAX_PLATFORMS": "cpu",
                    "XLA_FLAGS": f"--xla_force_host_platform_device_count={shape.chips_per_host}",
                },
            })
    return nodes


def up(args: argparse.Namespace) -> None:
    bucket = Path(args.bucket_dir).resolve()
    bucket.mkdir(parents=True, exist_ok=True)
    nodes = host_nodes(args.accelerator, args.topology, args.num_slices, args.cpu_hosts,
                       args.cpu_devices_per_host)
    # Ray's own token file (~/.ray/auth_token): `ray job` clients on this machine find it.
    run("create the Ray auth token", ["ray", "get-auth-token", "--generate"],
        dry_run=args.dry_run, capture=True)
    common = [f"--node-ip-address={NODE_IP}", "--disable-usage-stats",
              f"--object-store-memory={args.object_store_mb * 1024 * 1024}"]
    run("start the Ray head", [
        "ray", "start", "--head", f"--port={HEAD_PORT}", "--dashboard-host=127.0.0.1",
        f"--dashboard-port={DASHBOARD_PORT}", "--num-cpus=2", *common, *_node_ports(0),
    ], env=_env({"LAUNCHER_OUTPUT_DIR": str(bucket)}), dry_run=args.dry_run, capture=True)
    for i, node in enumerate(nodes, start=1):
        labels = ",".join(f"{k}={v}" for k, v in node["labels"].items())
        run(f"start simulated host {i - 1}", [
            "ray", "start", f"--address={NODE_IP}:{HEAD_PORT}", "--num-cpus=2",
            # All nodes here share the head's log directory, which its log monitor already
            # streams; a monitor per node would print every worker line once per node.
            "--include-log-monitor=False",
            f"--resources={json.dumps(node['resources'])}",
            *([f"--labels={labels}"] if labels else []), *common, *_node_ports(i),
        ], env=_env({**node["env"], "LAUNCHER_OUTPUT_DIR": str(bucket)}),
            dry_run=args.dry_run, capture=True)
    print(f"local Ray cluster up: dashboard {DASHBOARD_ADDRESS}, {len(nodes)} simulated hosts, "
          f"bucket directory {bucket}")


def down(args: argparse.Namespace) -> None:
    run("stop the local Ray cluster", ["ray", "stop", "--force"], dry_run=args.dry_run,
        capture=True)
    print("local Ray cluster stopped")


def status(args: argparse.Namespace) -> None:
    """Exits 0 when a dashboard answers on the local address (401 counts: auth is on)."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(f"{DASHBOARD_ADDRESS}/api/version", timeout=3)
    except urllib.error.HTTPError:
        pass
    except OSError:
        print(f"no local Ray cluster at {DASHBOARD_ADDRESS}")
        raise SystemExit(1) from None
    print(f"local Ray cluster running: {DASHBOARD_ADDRESS}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m launcher.local_cluster",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start the head and the simulated hosts")
    p_up.add_argument("--accelerator", default=None, help=f"default {DEFAULT_ACCELERATOR}")
    p_up.add_argument("--topology", default=None, help=f"default {DEFAULT_TOPOLOGY}")
    p_up.add_argument("--num-slices", type=int, default=1)
    p_up.add_argument("--cpu-hosts", type=int, default=None,
                      help="a CPU-only slice of this many hosts instead of a TPU slice")
    p_up.add_argument("--cpu-devices-per-host", type=int, default=2)
    p_up.add_argument("--bucket-dir", default=".local/bucket",
                      help="directory that stands for the mounted checkpoint bucket")
    p_up.add_argument("--object-store-mb", type=int, default=256)
    p_up.add_argument("--dry-run", action="store_true")
    p_down = sub.add_parser("down", help="stop every Ray process on this machine")
    p_down.add_argument("--dry-run", action="store_true")
    sub.add_parser("status", help="exit 0 when the local cluster's dashboard answers")
    args = parser.parse_args(argv)
    try:
        {"up": up, "down": down, "status": status}[args.command](args)
    except UsageError as e:
        exit_with(e, prog="local_cluster")


if __name__ == "__main__":
    main()
