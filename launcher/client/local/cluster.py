"""A real Ray cluster on 127.0.0.1 that looks to Ray Train like a TPU slice.

One head node, then one Ray node per simulated host. Each host advertises the resources and
labels KubeRay and the GKE TPU webhook give a real TPU host (TPU chips, the slice name, the
worker id, the topology, the pod type, the `TPU-<pod type>-head` resource on worker 0), so
JaxTrainer takes Ray's own TPU path: slice reservation, gang scheduling, jax.distributed. Each
host's JAX sees its chips as CPU devices. A CPU-only slice (no TPU resources) is offered too.
This module starts and stops the processes; local/layout.py says what each host is, and
local/nodes.py how Ray and the machine see them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from launcher.client.commands import run
from launcher.client.local.instance import MEMBER_ENV, NODE_IP, local_instance
from launcher.client.local.layout import HOST_ENV, LocalClusterSpec, host_nodes
from launcher.client.local.nodes import (
    alive_names,
    kill_hosts,
    processes_with_env,
    raylet_of,
    wait_until_gone,
    wait_until_registered,
)
from launcher.core.errors import CommandError, UsageError
from launcher.core.job.checkpoint_tiers import MEMORY_DIR_ENV
from launcher.core.job.run_dir import OUTPUT_DIR_ENV
from launcher.core.tpu.device_metrics import DEVICE_PLUGIN_ADDR_ENV
from launcher.core.tpu.slices import LABEL_ACCELERATOR, LABEL_SLICE, LABEL_TOPOLOGY, LABEL_WORKER_ID

# Token auth is on, as in the chart: anyone who reaches a dashboard can run code. In this mode
# every process of the cluster, and every client of it here, reads Ray's token file (`up` makes
# it).
TOKEN_AUTH = {"RAY_AUTH_MODE": "token"}
# `ray start` gives a new raylet a fixed 30 s to register with the GCS (ray/_private/node.py)
# and then gives up with this message, while the raylet goes on starting: on a busy machine it
# can take longer. The node is then waited for, as long as this, before it counts as failed.
SLOW_REGISTRATION = "timed out during startup"
REGISTRATION_TIMEOUT_S = 300.0


def nodes_file() -> Path:
    """The simulated hosts as `up` started them, in the Ray session's own directory (a new
    session, a new file): `slice-up` starts a slice's hosts again from it."""
    return local_instance().ray_dir / "session_latest" / "tpu-launcher-nodes.json"


def _env(extra: dict[str, str]) -> dict[str, str]:
    # Jobs run `python -m launcher.runtime train`: put this environment's python first on PATH.
    bin_dir = str(Path(sys.executable).parent)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        **TOKEN_AUTH,
        **local_instance().env,  # the slot, on every process of the cluster (down stops them)
        **extra,
    }


def up(spec: LocalClusterSpec) -> None:
    """Starts the head and the simulated hosts, unless a local cluster already answers. A step
    that fails stops what the earlier steps started, so a retry starts clean."""
    if not spec.dry_run and is_running():
        _refuse_if_another_directorys("use")
        address = local_instance().dashboard_address
        print(f"local Ray cluster already running: {address} (`tpu-launcher down` stops it)")
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
            stop_processes()
        raise
    print(
        f"local Ray cluster up in {time.monotonic() - started:.0f} s: dashboard "
        f"{local_instance().dashboard_address}, {len(nodes)} simulated hosts, bucket directory "
        f"{bucket}"
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
    here = local_instance()
    _start_node(
        "the Ray head",
        HEAD_NAME,
        [
            "ray",
            "start",
            "--head",
            f"--port={here.head_port}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={here.dashboard_port}",
            f"--ray-client-server-port={here.client_port}",
            "--num-cpus=2",
            *common,
            *here.node_ports(0),
        ],
        _env({OUTPUT_DIR_ENV: str(bucket)}),
        spec.dry_run,
    )
    start_device_plugins(nodes, spec.dry_run)
    for i, node in enumerate(nodes):
        start_host(i, node, bucket, spec.object_store_mb, spec.dry_run)
    if not spec.dry_run:  # what `slice-up` starts again
        nodes_file().write_text(
            json.dumps(
                {
                    "nodes": nodes,
                    "bucket": str(bucket),
                    "object_store_mb": spec.object_store_mb,
                    "started_from": str(Path.cwd()),
                }
            )
        )


def _simulated_chips(index: int, node: dict):
    """What the device plugin stand-in serves for simulated host `index` (None: a CPU host)."""
    from launcher.client.local.device_plugin import SimulatedChips
    from launcher.core.tpu.table import generation

    chips = node["resources"].get("TPU")
    if not chips:
        return None
    gen = generation(node["labels"][LABEL_ACCELERATOR])
    return SimulatedChips(
        node["name"],
        local_instance().device_plugin_port(index + 1),
        int(node["labels"][LABEL_WORKER_ID]),
        int(chips),
        gen.gke_accelerator,
        node["labels"][LABEL_TOPOLOGY],
        gen.hbm_gib * 2**30,
    )


def start_device_plugins(nodes: list[dict], dry_run: bool) -> None:
    """The device plugin stand-in (launcher.client.local.device_plugin) for the simulated TPU
    hosts, serving before their agents first ask (an agent that cannot reach it stops asking);
    it carries the slot, so `down` stops it."""
    import subprocess

    hosts = [c for i, n in enumerate(nodes) if (c := _simulated_chips(i, n)) is not None]
    if not hosts or dry_run:
        return
    session = local_instance().ray_dir / "session_latest"
    spec = json.dumps({"hosts": [h.to_json() for h in hosts], "ray_session": str(session)})
    log = (session / "logs" / "tpu-launcher-device-plugin.log").open("ab")
    subprocess.Popen(
        [sys.executable, "-m", "launcher.client.local.device_plugin", spec],
        env={**os.environ, **_env({})},
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    for host in hosts:
        while not _answers(f"http://127.0.0.1:{host.port}/metrics"):
            if time.monotonic() > deadline:
                raise UsageError(
                    "up",
                    f"the TPU device plugin stand-in did not answer on port {host.port} within "
                    "30 s",
                    f"read {session / 'logs' / 'tpu-launcher-device-plugin.log'}; another "
                    "program may hold the port: `tpu-launcher down`, then `tpu-launcher up`",
                )
            time.sleep(0.2)


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).close()
        return True
    except OSError:
        return False


def start_host(index: int, node: dict, bucket: Path, object_store_mb: int, dry_run: bool) -> None:
    labels = ",".join(f"{k}={v}" for k, v in node["labels"].items())
    chips = _simulated_chips(index, node)
    # As the KubeRay TPU webhook names the node's device plugin to a TPU pod: Ray's agent
    # scrapes it (launcher.core.tpu.device_metrics).
    plugin = {DEVICE_PLUGIN_ADDR_ENV: f"127.0.0.1:{chips.port}"} if chips else {}
    _start_node(
        f"simulated host {index} ({node['name']})",
        node["name"],
        [
            "ray",
            "start",
            f"--address={local_instance().head_address}",
            "--num-cpus=2",
            # All nodes here share the head's log directory, which its log monitor already
            # streams; a monitor per node would print every worker line once per node.
            "--include-log-monitor=False",
            f"--resources={json.dumps(node['resources'])}",
            *([f"--labels={labels}"] if labels else []),
            *_common_args(object_store_mb),
            *local_instance().node_ports(index + 1),
        ],
        # HOST_ENV names the host on each of its processes: `preempt` finds them by it.
        _env(
            {
                **node["env"],
                **plugin,
                OUTPUT_DIR_ENV: str(bucket),
                HOST_ENV: node["name"],
                MEMORY_DIR_ENV: str(_empty_memory(node["name"], dry_run)),
            }
        ),
        dry_run,
    )


def _empty_memory(name: str, dry_run: bool) -> Path:
    """The host's memory volume, empty: a host that starts (again) is a new pod, whose
    emptyDir of medium Memory starts empty; its worker processes' restarts keep it."""
    directory = local_instance().memory_root / name
    if not dry_run:
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
    return directory


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
        wait_until_registered(name, timeout_s, raylet_of(name))
        print(f"{what} registered after {time.monotonic() - started:.0f} s", flush=True)


def idle_chips(host: int, idle: bool) -> None:
    """Holds simulated host `host`'s chips idle in the device plugin stand-in's figures (or
    lets it go)."""
    from launcher.client.local.device_plugin import holds_dir

    record, _ = slice_hosts(0)
    nodes = record["nodes"]
    if not 0 <= host < len(nodes) or _simulated_chips(host, nodes[host]) is None:
        tpu_hosts = [i for i, n in enumerate(nodes) if _simulated_chips(i, n) is not None]
        raise UsageError(
            "--host",
            f"is {host}: the local cluster's simulated TPU hosts are "
            f"{', '.join(map(str, tpu_hosts)) or 'none'}",
            "pass one of them",
        )
    name = nodes[host]["name"]
    holds = holds_dir(local_instance().ray_dir / "session_latest")
    holds.mkdir(exist_ok=True)
    if idle:
        (holds / name).touch()
        print(
            f"{name}: its chips report a duty cycle of 0 (`tpu-launcher local idle-chips --host "
            f"{host} --off` ends it)"
        )
    else:
        (holds / name).unlink(missing_ok=True)
        print(f"{name}: its chips report their own figures")


def slice_hosts(slice_index: int) -> tuple[dict, list[tuple[int, dict]]]:
    """The running cluster's record and the (index, node) of each host of one slice."""
    if not is_running() or not nodes_file().is_file():
        raise UsageError(
            "slice",
            "no local Ray cluster is running",
            "start one: tpu-launcher up --tpu v5p-16 --num-slices 2",
        )
    record = json.loads(nodes_file().read_text())
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
    if not is_running() or not nodes_file().is_file():
        return 0
    return len(_slice_names(json.loads(nodes_file().read_text())["nodes"]))


def _slice_names(nodes: list[dict]) -> set[str]:
    return {n["labels"][LABEL_SLICE] for n in nodes if LABEL_SLICE in n["labels"]}


def slice_down(slice_index: int) -> int:
    """Kills every process of one simulated slice's hosts (their raylets and the workers on
    them), as a preempted TPU slice's VMs vanish; Ray then sees the nodes die. Returns how
    many processes were killed."""
    _, hosts = slice_hosts(slice_index)
    names = {node["name"] for _, node in hosts}
    killed = kill_hosts(names)
    since = time.monotonic()
    wait_until_gone(names, "slice-down")
    print(
        f"slice {slice_index} (local-slice-{slice_index}) is down: killed {killed} processes of "
        f"its hosts; Ray saw them go in {time.monotonic() - since:.0f} s"
    )
    return killed


def slice_up(slice_index: int) -> None:
    """Starts one simulated slice's hosts again, with the resources and labels they had."""
    record, hosts = slice_hosts(slice_index)
    if running := sorted({n["name"] for _, n in hosts} & (alive_names() or set())):
        raise UsageError(
            "slice-up",
            f"slice {slice_index}'s hosts are running ({', '.join(running)})",
            f"take the slice down first: tpu-launcher local slice-down {slice_index}",
        )
    for index, node in hosts:
        start_host(index, node, Path(record["bucket"]), record["object_store_mb"], False)
    print(f"slice {slice_index} is back: {len(hosts)} hosts joined the local cluster")


def running_bucket() -> Path | None:
    """The bucket directory of the local cluster `up` last started here (None: none known)."""
    try:
        return Path(json.loads(nodes_file().read_text())["bucket"])
    except (OSError, ValueError, KeyError):
        return None


def running_bucket_of_here() -> Path | None:
    """The running local cluster's bucket directory when `up` started it from this directory."""
    owner = _started_from()
    return running_bucket() if owner is not None and Path(owner) == Path.cwd() else None


def _started_from() -> str | None:
    """The directory `up` ran in for the running cluster (None: unknown, e.g. a `ray start`)."""
    try:
        return json.loads(nodes_file().read_text()).get("started_from")
    except (OSError, ValueError):
        return None


def _refuse_if_another_directorys(verb: str) -> None:
    """One local cluster per machine (its ports are fixed): a second checkout must not use or
    stop the first one's without saying so (a subdirectory of the one `up` ran in is that
    project's, as for a job: _is_here)."""
    owner = _started_from()
    if owner is not None and not _is_here(owner):
        raise UsageError(
            "local cluster",
            f"the local Ray cluster on {local_instance().dashboard_address} was started from "
            f"{owner}, not from this directory ({Path.cwd()}); its checkpoints go to that "
            "directory's bucket",
            f"{verb} it from {owner}, or stop it with `tpu-launcher down --force` and start "
            "this directory's own with `tpu-launcher up`",
        )


def _is_here(owner: str) -> bool:
    """This directory is the one `up` ran in, or inside it (a project's subdirectory)."""
    return Path.cwd() == Path(owner) or Path(owner) in Path.cwd().parents


def jobs_cluster_here(acting: bool) -> str:
    """The local cluster's address for a job command that names no cluster (no --address,
    --release, RAY_ADDRESS), said on stderr first. A cluster `up` started from another
    directory writes to that directory's bucket: submit and stop (`acting`) refuse it with
    where it was started; list, status and logs read it, saying whose it is."""
    address = local_instance().dashboard_address
    owner = _started_from() if is_running() else None
    if owner is None:
        print(f"cluster: the local Ray cluster at {address}", file=sys.stderr, flush=True)
        return address
    if acting and not _is_here(owner):
        raise UsageError(
            "local cluster",
            f"no --address or --release given, and the local Ray cluster at {address} was "
            f"started from {owner}, not from this directory ({Path.cwd()}): the job would run "
            f"on that directory's cluster and write to its bucket ({running_bucket()})",
            f"run the command from {owner}; pass --address {address} to use that cluster "
            "anyway; or start this directory's own (`tpu-launcher down --force`, then "
            "`tpu-launcher up` here)",
        )
    whose = "here" if _is_here(owner) else f"from {owner}, not from this directory"
    print(f"cluster: the local Ray cluster at {address}, started {whose}", file=sys.stderr)
    return address


def down(dry_run: bool = False, force: bool = False) -> None:
    if not dry_run and not force and is_running():
        _refuse_if_another_directorys("stop")
    if dry_run:
        print(f"[dry-run] stop every process of local cluster slot {local_instance().slot}")
        return
    stopped = stop_processes()
    shutil.rmtree(local_instance().memory_root, ignore_errors=True)  # the hosts' memory goes
    print(f"local Ray cluster stopped ({stopped} processes)")


STOP_GRACE_S = 10.0  # as `ray stop`: a term first, then a kill for what is left


def stop_processes() -> int:
    """Stops every process of this slot's cluster (each carries the slot in its environment),
    and none of another slot's, as `ray stop` would; returns how many there were. A cluster
    older than the slot (none carries it) is stopped with `ray stop --force`, on slot 0 only."""
    import psutil

    slot = local_instance().slot
    mine = {p.pid for p in psutil.Process().parents()} | {os.getpid()}
    victims = [p for p in processes_with_env(MEMBER_ENV, {str(slot)}) if p.pid not in mine]
    if not victims:
        if slot == 0 and is_running():
            run("stop the local Ray cluster", ["ray", "stop", "--force"], capture=True)
        return 0
    for proc in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(victims, timeout=STOP_GRACE_S)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=STOP_GRACE_S)
    return len(victims)


def is_running() -> bool:
    """A dashboard answers on the local address (401 counts: auth is on)."""
    try:
        urllib.request.urlopen(f"{local_instance().dashboard_address}/api/version", timeout=3)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def status() -> int:
    """0 when the local cluster answers, else 1."""
    if is_running():
        print(f"local Ray cluster running: {local_instance().dashboard_address}")
        return 0
    print(f"no local Ray cluster at {local_instance().dashboard_address}")
    return 1
