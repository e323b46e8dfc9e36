"""A real Ray cluster on 127.0.0.1 that looks to Ray Train like a TPU slice.

One head node, then one Ray node per simulated host. Each host advertises the resources and
labels KubeRay and the GKE TPU webhook give a real TPU host (TPU chips, the slice name, the
worker id, the topology, the pod type, the `TPU-<pod type>-head` resource on worker 0), so
JaxTrainer takes Ray's own TPU path: slice reservation, gang scheduling, jax.distributed. Each
host's JAX sees its chips as CPU devices. A CPU-only slice (no TPU resources) is offered too.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from launcher.client.commands import run
from launcher.client.ray_jobs_api import DASHBOARD_PORT
from launcher.client.ray_jobs_api import DEFAULT_ADDRESS as DASHBOARD_ADDRESS
from launcher.core.errors import CommandError, UsageError
from launcher.core.ray_auth import auth_headers
from launcher.core.run_dir import OUTPUT_DIR_ENV
from launcher.core.slices import (
    LABEL_ACCELERATOR,
    LABEL_POD_TYPE,
    LABEL_SLICE,
    LABEL_TOPOLOGY,
    LABEL_WORKER_ID,
    TpuSlices,
    from_flags,
)
from launcher.core.tpu_table import GENERATIONS, slice_shape

# Ray swaps 127.0.0.1 for the machine's network address; another loopback address it keeps,
# so the whole cluster stays on loopback.
NODE_IP = "127.0.0.2"
HEAD_PORT = 6379
# Each node on one machine needs its own agent ports: above Ray's worker ports (10002-19999)
# and below Linux's ephemeral ports (32768-60999), where any outgoing connection may hold one
# just when a host starts again and its agent must bind it.
_PORT_BASE = 20400
DEFAULT_TPU = "v5p-16"  # 2 hosts x 4 chips, the smallest real multi-host slice
# Each simulated host is a Ray node whose training worker holds a JAX process with MaxText
# (about 1.5 GB): more than this many does not fit a workstation's memory.
MAX_SIMULATED_HOSTS = 8
HOST_ENV = "LAUNCHER_LOCAL_HOST"  # each simulated host's name, on every process it runs
# The simulated hosts as `up` started them, in the Ray session's own directory (a new session,
# a new file): `slice-up` starts a slice's hosts again from it.
NODES_FILE = Path("/tmp/ray/session_latest/tpu-launcher-nodes.json")


def _node_ports(index: int) -> list[str]:
    base = _PORT_BASE + 10 * index
    return [
        f"--dashboard-agent-listen-port={base}",
        f"--dashboard-agent-grpc-port={base + 1}",
        f"--metrics-export-port={base + 2}",
        f"--runtime-env-agent-port={base + 3}",
    ]


def _env(extra: dict[str, str]) -> dict[str, str]:
    # Jobs run `python -m launcher train`: put this environment's python first on PATH.
    # Token auth is on, as in the chart: anyone who reaches a dashboard can run code.
    bin_dir = str(Path(sys.executable).parent)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "RAY_AUTH_MODE": "token",
        **extra,
    }


def _smallest_multi_host(generation_name: str) -> str:
    topologies = GENERATIONS[generation_name].topologies
    return next(
        shape.name
        for shape in (slice_shape(generation_name, topo) for topo in topologies)
        if shape.multi_host
    )


def host_nodes(
    accelerator: str | None,
    topology: str | None,
    num_slices: int,
    cpu_hosts: int | None,
    cpu_devices: int | None,
    tpu: str | None = None,
) -> list[dict]:
    """The `ray start` resources, labels and env of each simulated host."""
    nodes = []
    if cpu_hosts:
        env = {
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": f"--xla_force_host_platform_device_count={cpu_devices}",
        }
        return [
            {"name": f"cpu-host-{i}", "resources": {}, "labels": {}, "env": env}
            for i in range(cpu_hosts)
        ]
    if not (tpu or accelerator or topology):
        tpu = DEFAULT_TPU
    slices = from_flags(accelerator, topology, num_slices, None, None, None, tpu=tpu)
    assert isinstance(slices, TpuSlices)
    shape = slices.shape
    if slices.num_workers > MAX_SIMULATED_HOSTS:
        raise UsageError(
            "tpu",
            f"{slices.describe()} has {slices.num_workers} hosts; the local cluster simulates at "
            f"most {MAX_SIMULATED_HOSTS} (each runs a JAX process with MaxText)",
            f"simulate the smallest multi-host slice of the same generation: "
            f"--tpu={_smallest_multi_host(shape.generation.name)}",
        )
    for s in range(num_slices):
        for host in range(shape.hosts):
            resources = {
                # Ray counts TPU per chip (ray#64058: per device only with
                # RAY_TPU_RESOURCE_PER_CHIP), as a tpu7x pod with google.com/tpu: 4 shows it.
                "TPU": shape.chips_per_host,
                f"accelerator_type:{shape.generation.ray_accelerator_type}": 1,
            }
            if host == 0:
                resources[f"TPU-{shape.pod_type}-head"] = 1
            nodes.append(
                {
                    "name": f"local-slice-{s}-host-{host}",
                    "resources": resources,
                    "labels": {
                        LABEL_SLICE: f"local-slice-{s}",
                        LABEL_WORKER_ID: str(host),
                        LABEL_TOPOLOGY: shape.topology,
                        LABEL_ACCELERATOR: shape.generation.ray_accelerator_type,
                        LABEL_POD_TYPE: shape.pod_type,
                    },
                    # What the GKE TPU webhook injects into a TPU pod; Ray reads the slice
                    # name here.
                    "env": {
                        "TPU_NAME": f"local-slice-{s}",
                        "TPU_WORKER_ID": str(host),
                        "JAX_PLATFORMS": "cpu",
                        # A host's JAX devices: its chips, or two per chip on tpu7x.
                        "XLA_FLAGS": (
                            f"--xla_force_host_platform_device_count={shape.devices_per_host}"
                        ),
                        # As the chart's multi-slice pods declare it (for the TPU webhook): a
                        # job on fewer slices must not believe it.
                        **({"MEGASCALE_NUM_SLICES": str(num_slices)} if num_slices > 1 else {}),
                    },
                }
            )
    return nodes


@dataclass(frozen=True)
class LocalClusterSpec:
    """What `tpu-launcher up` starts: one simulated slice shape (TPU) or a CPU-only slice."""

    tpu: str | None = None  # the simulated slice's name; default v5p-16
    accelerator: str | None = None
    topology: str | None = None
    num_slices: int = 1
    cpu_hosts: int | None = None
    cpu_devices_per_host: int = 2
    bucket_dir: str = ".local/bucket"
    object_store_mb: int = 256
    dry_run: bool = False


def up(spec: LocalClusterSpec) -> None:
    """Starts the head and the simulated hosts, unless a local cluster already answers. A step
    that fails stops what the earlier steps started, so a retry starts clean."""
    if not spec.dry_run and is_running():
        _refuse_if_another_directorys("use")
        print(
            f"local Ray cluster already running: {DASHBOARD_ADDRESS} (`tpu-launcher down` stops it)"
        )
        return
    bucket = Path(spec.bucket_dir).resolve()
    bucket.mkdir(parents=True, exist_ok=True)
    nodes = host_nodes(
        spec.accelerator,
        spec.topology,
        spec.num_slices,
        spec.cpu_hosts,
        spec.cpu_devices_per_host,
        tpu=spec.tpu,
    )
    started = time.monotonic()
    try:
        _start(spec, nodes, bucket)
    except (CommandError, UsageError):
        if not spec.dry_run:
            run("stop what was started", ["ray", "stop", "--force"], capture=True, check=False)
        raise
    print(
        f"local Ray cluster up in {time.monotonic() - started:.0f} s: dashboard "
        f"{DASHBOARD_ADDRESS}, {len(nodes)} simulated hosts, bucket directory {bucket}"
    )


def _common_args(object_store_mb: int) -> list[str]:
    return [
        f"--node-ip-address={NODE_IP}",
        "--disable-usage-stats",
        f"--object-store-memory={object_store_mb * 1024 * 1024}",
    ]


def _start(spec: LocalClusterSpec, nodes: list[dict], bucket: Path) -> None:
    # Ray's own token file (~/.ray/auth_token): `ray job` clients on this machine find it.
    run(
        "create the Ray auth token",
        ["ray", "get-auth-token", "--generate"],
        dry_run=spec.dry_run,
        capture=True,
    )
    common = _common_args(spec.object_store_mb)
    _start_node(
        "the Ray head",
        HEAD_NAME,
        [
            "ray",
            "start",
            "--head",
            f"--port={HEAD_PORT}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={DASHBOARD_PORT}",
            "--num-cpus=2",
            *common,
            *_node_ports(0),
        ],
        _env({OUTPUT_DIR_ENV: str(bucket)}),
        spec.dry_run,
    )
    for i, node in enumerate(nodes):
        _start_host(i, node, bucket, spec.object_store_mb, spec.dry_run)
    if not spec.dry_run:  # what `slice-up` starts again
        NODES_FILE.write_text(
            json.dumps(
                {
                    "nodes": nodes,
                    "bucket": str(bucket),
                    "object_store_mb": spec.object_store_mb,
                    "started_from": str(Path.cwd()),
                }
            )
        )


def _start_host(index: int, node: dict, bucket: Path, object_store_mb: int, dry_run: bool) -> None:
    labels = ",".join(f"{k}={v}" for k, v in node["labels"].items())
    _start_node(
        f"simulated host {index} ({node['name']})",
        node["name"],
        [
            "ray",
            "start",
            f"--address={NODE_IP}:{HEAD_PORT}",
            "--num-cpus=2",
            # All nodes here share the head's log directory, which its log monitor already
            # streams; a monitor per node would print every worker line once per node.
            "--include-log-monitor=False",
            f"--resources={json.dumps(node['resources'])}",
            *([f"--labels={labels}"] if labels else []),
            *_common_args(object_store_mb),
            *_node_ports(index + 1),
        ],
        # HOST_ENV names the host on each of its processes: `preempt` finds them by it.
        _env({**node["env"], OUTPUT_DIR_ENV: str(bucket), HOST_ENV: node["name"]}),
        dry_run,
    )


# `ray start` gives a new raylet a fixed 30 s to register with the GCS (ray/_private/node.py)
# and then gives up with this message, while the raylet goes on starting: on a busy machine it
# can take longer. The node is then waited for, as long as this, before it counts as failed.
SLOW_REGISTRATION = "timed out during startup"
REGISTRATION_TIMEOUT_S = 300.0
HEAD_NAME = "head"


def _start_node(
    what: str,
    name: str,
    argv: list[str],
    env: dict[str, str],
    dry_run: bool,
    timeout_s: float = REGISTRATION_TIMEOUT_S,
) -> None:
    """`ray start` for one node (the head or a simulated host) under `name`; when Ray stops
    waiting for it to register, waits for it here, bounded, and says how long it took."""
    started = time.monotonic()
    try:
        run(f"start {what}", [*argv, f"--node-name={name}"], env=env, dry_run=dry_run, capture=True)
    except CommandError as e:
        if SLOW_REGISTRATION not in e.output:
            raise
        print(
            f"{what}: `ray start` stopped waiting for it to register (Ray's fixed 30 s); "
            f"waiting up to {timeout_s:g} s more",
            flush=True,
        )
        wait_until_registered(name, timeout_s, _raylet_of(name))
        print(f"{what} registered after {time.monotonic() - started:.0f} s", flush=True)


def _slice_hosts(slice_index: int) -> tuple[dict, list[tuple[int, dict]]]:
    """The running cluster's record and the (index, node) of each host of one slice."""
    if not is_running() or not NODES_FILE.is_file():
        raise UsageError(
            "slice",
            "no local Ray cluster is running",
            "start one: tpu-launcher up --tpu v5p-16 --num-slices 2",
        )
    record = json.loads(NODES_FILE.read_text())
    name = f"local-slice-{slice_index}"
    hosts = [(i, n) for i, n in enumerate(record["nodes"]) if n["labels"].get(LABEL_SLICE) == name]
    if not hosts:
        count = len(_slice_names(record["nodes"]))
        raise UsageError(
            "slice",
            f"the local cluster has no slice {slice_index} (it has {count} TPU slice(s))",
            f"pass a slice index 0 .. {count - 1} (`tpu-launcher up --num-slices 2` starts two)",
        )
    return record, hosts


def running_slices() -> int:
    """How many simulated TPU slices the running local cluster was started with (0: none, or a
    CPU-only cluster)."""
    if not is_running() or not NODES_FILE.is_file():
        return 0
    return len(_slice_names(json.loads(NODES_FILE.read_text())["nodes"]))


def _slice_names(nodes: list[dict]) -> set[str]:
    return {n["labels"][LABEL_SLICE] for n in nodes if LABEL_SLICE in n["labels"]}


def slice_down(slice_index: int) -> int:
    """Kills every process of one simulated slice's hosts (their raylets and the workers on
    them), as a preempted TPU slice's VMs vanish; Ray then sees the nodes die. Returns how
    many processes were killed."""
    _, hosts = _slice_hosts(slice_index)
    names = {node["name"] for _, node in hosts}
    killed = kill_hosts(names)
    since = time.monotonic()
    wait_until_gone(names, "slice-down")
    print(
        f"slice {slice_index} (local-slice-{slice_index}) is down: killed {killed} processes of "
        f"its hosts; Ray saw them go in {time.monotonic() - since:.0f} s"
    )
    return killed


def kill_hosts(names: set[str]) -> int:
    """SIGKILLs every process of the simulated hosts `names`; returns how many."""
    import psutil

    victims = processes_with_env(HOST_ENV, names)
    for proc in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    return len(victims)


GONE_TIMEOUT_S = 120.0  # Ray's health check marks a killed node dead within about 30 s


def wait_until_gone(names: set[str], what: str, timeout_s: float = GONE_TIMEOUT_S) -> None:
    """Until Ray no longer counts the nodes `names` alive: a host started again under the same
    name before that would be taken for the old one."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = _alive_names()
        if alive is not None and not names & alive:
            return
        if time.monotonic() > deadline:
            still = ", ".join(sorted(names & alive)) if alive else "their nodes"
            raise UsageError(
                what,
                f"{still} still alive in Ray (or its state API silent) {timeout_s:g} s after "
                "their processes were killed",
                "tpu-launcher down, then tpu-launcher up",
            )
        time.sleep(1)


def processes_with_env(key: str, values: set[str]) -> list:
    """This machine's processes whose environment sets `key` to one of `values`, and every
    process they started: a simulated host's raylet carries its env, and so do the agents and
    workers it starts, but those rename themselves (`ray::RayTrainWorker`), which overwrites
    what /proc shows of their environment, so they are found as the raylet's children.
    Collected before any is killed: a dead raylet's children are handed to init."""
    import psutil

    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(key) in values:
                found[proc.pid] = proc
                found.update((child.pid, child) for child in proc.children(recursive=True))
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return list(found.values())


def slice_up(slice_index: int) -> None:
    """Starts one simulated slice's hosts again, with the resources and labels they had."""
    record, hosts = _slice_hosts(slice_index)
    if running := sorted({n["name"] for _, n in hosts} & (_alive_names() or set())):
        raise UsageError(
            "slice-up",
            f"slice {slice_index}'s hosts are running ({', '.join(running)})",
            f"take the slice down first: tpu-launcher slice-down {slice_index}",
        )
    for index, node in hosts:
        _start_host(index, node, Path(record["bucket"]), record["object_store_mb"], False)
    print(f"slice {slice_index} is back: {len(hosts)} hosts joined the local cluster")


def _alive_nodes() -> list[dict]:
    """The live nodes, from Ray's state API on the local dashboard, with the local token."""
    request = urllib.request.Request(
        f"{DASHBOARD_ADDRESS}/api/v0/nodes?limit=1000&detail=1", headers=auth_headers()
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        nodes = json.load(response)["data"]["result"]["result"]
    return [n for n in nodes if n["state"] == "ALIVE"]


def alive_hosts() -> set[tuple[str, str]]:
    """(slice name, worker id) of every live simulated TPU host."""
    return {
        (n["labels"][LABEL_SLICE], n["labels"][LABEL_WORKER_ID])
        for n in _alive_nodes()
        if LABEL_SLICE in n.get("labels", {})
    }


def _alive_names() -> set[str] | None:
    """The names of the live nodes; None while Ray's state API does not answer."""
    try:
        return {n["node_name"] for n in _alive_nodes() if n.get("node_name")}
    except (OSError, ValueError, KeyError):
        return None


def _is_alive(name: str) -> bool:
    return name in (_alive_names() or set())


def wait_until_registered(name: str, timeout_s: float, raylet) -> None:
    """Until the node `name` is alive in Ray's state API, which may not answer at first (the
    dashboard still starting, or the GCS too busy); at most `timeout_s`, and no longer than its
    `raylet` (a psutil.Process, None: none was found) runs: one that exited will never
    register, and its log says why."""
    log = _log_of(raylet)
    deadline = time.monotonic() + timeout_s
    while not _is_alive(name):
        if not _running(raylet):
            raise UsageError(
                "up",
                f"Ray node {name}'s raylet exited before it registered with the local "
                f"cluster{_tail(log)}",
                f"read {log or '/tmp/ray/session_latest/logs/raylet*.out'} for the cause, then "
                "`tpu-launcher down` and `tpu-launcher up`",
            )
        if time.monotonic() > deadline:
            raise UsageError(
                "up",
                f"Ray node {name} did not register with the local cluster within {timeout_s:g} s "
                f"of `ray start` giving up{_tail(log)}",
                "the machine may be out of CPU or memory: stop what runs beside it, then "
                "`tpu-launcher down` and `tpu-launcher up`",
            )
        time.sleep(2)


def _raylet_of(name: str):
    """The raylet `ray start` started for the node `name` (None: none runs)."""
    import psutil

    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "raylet" and f"--node-name={name}" in (proc.info["cmdline"] or []):
            return proc
    return None


def _running(proc) -> bool:
    import psutil

    try:
        return proc is not None and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _log_of(proc) -> Path | None:
    """Where a raylet writes its log: Ray points its stdout at the session's raylet*.out."""
    try:
        return Path(f"/proc/{proc.pid}/fd/1").readlink() if proc is not None else None
    except OSError:
        return None


def _tail(log: Path | None, lines: int = 8) -> str:
    try:
        last = log.read_text(errors="replace").splitlines()[-lines:] if log else []
    except OSError:
        return ""
    return "; the end of its log (" + str(log) + "):\n    " + "\n    ".join(last) if last else ""


def running_bucket() -> Path | None:
    """The bucket directory of the local cluster `up` last started here (None: none known)."""
    try:
        return Path(json.loads(NODES_FILE.read_text())["bucket"])
    except (OSError, ValueError, KeyError):
        return None


def _started_from() -> str | None:
    """The directory `up` ran in for the running cluster (None: unknown, e.g. a `ray start`)."""
    try:
        return json.loads(NODES_FILE.read_text()).get("started_from")
    except (OSError, ValueError):
        return None


def _refuse_if_another_directorys(verb: str) -> None:
    """One local cluster per machine (its ports are fixed): a second checkout must not use or
    stop the first one's without saying so."""
    owner = _started_from()
    if owner is not None and Path(owner) != Path.cwd():
        raise UsageError(
            "local cluster",
            f"the local Ray cluster on {DASHBOARD_ADDRESS} was started from {owner}, not from "
            f"this directory ({Path.cwd()}); its checkpoints go to that directory's bucket",
            f"{verb} it from {owner}, or stop it with `tpu-launcher down --force` and start "
            "this directory's own with `tpu-launcher up`",
        )


def down(dry_run: bool = False, force: bool = False) -> None:
    if not dry_run and not force and is_running():
        _refuse_if_another_directorys("stop")
    run("stop the local Ray cluster", ["ray", "stop", "--force"], dry_run=dry_run, capture=True)
    print("local Ray cluster stopped")


def is_running() -> bool:
    """A dashboard answers on the local address (401 counts: auth is on)."""
    try:
        urllib.request.urlopen(f"{DASHBOARD_ADDRESS}/api/version", timeout=3)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def status() -> int:
    """0 when the local cluster answers, else 1."""
    if is_running():
        print(f"local Ray cluster running: {DASHBOARD_ADDRESS}")
        return 0
    print(f"no local Ray cluster at {DASHBOARD_ADDRESS}")
    return 1
