"""The local cluster's nodes as Ray and this machine see them: which are alive (Ray's state API
on the local dashboard), waiting for one to register or for killed ones to be gone, and the
processes of a simulated host (found by the env it was started with), to kill as a preemption
would.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
from pathlib import Path

from launcher.client.local.instance import MEMBER_ENV, local_instance
from launcher.client.local.layout import HOST_ENV
from launcher.core.errors import UsageError
from launcher.core.ray_auth import auth_headers
from launcher.core.tpu.slices import LABEL_SLICE, LABEL_WORKER_ID


def alive_nodes() -> list[dict]:
    """The live nodes, from Ray's state API on the local dashboard, with the local token."""
    address = local_instance().dashboard_address
    request = urllib.request.Request(
        f"{address}/api/v0/nodes?limit=1000&detail=1", headers=auth_headers()
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        nodes = json.load(response)["data"]["result"]["result"]
    return [n for n in nodes if n["state"] == "ALIVE"]


def alive_hosts() -> set[tuple[str, str]]:
    """(slice name, worker id) of every live simulated TPU host."""
    return {
        (n["labels"][LABEL_SLICE], n["labels"][LABEL_WORKER_ID])
        for n in alive_nodes()
        if LABEL_SLICE in n.get("labels", {})
    }


def alive_names() -> set[str] | None:
    """The names of the live nodes; None while Ray's state API does not answer."""
    try:
        return {n["node_name"] for n in alive_nodes() if n.get("node_name")}
    except (OSError, ValueError, KeyError):
        return None


def is_alive(name: str) -> bool:
    return name in (alive_names() or set())


def wait_until_registered(name: str, timeout_s: float, raylet) -> None:
    """Until the node `name` is alive in Ray's state API, which may not answer at first (the
    dashboard still starting, or the GCS too busy); at most `timeout_s`, and no longer than its
    `raylet` (a psutil.Process, None: none was found) runs: one that exited will never
    register, and its log says why."""
    log = _log_of(raylet)
    deadline = time.monotonic() + timeout_s
    while not is_alive(name):
        if not _running(raylet):
            raise UsageError(
                "up",
                f"Ray node {name}'s raylet exited before it registered with the local "
                f"cluster{_tail(log)}",
                f"read {log or 'logs/raylet*.out in the Ray session'} for the cause, then "
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


def raylet_of(name: str):
    """The raylet `ray start` started for the node `name` of this slot's cluster (None: none
    runs; another slot's cluster has nodes of the same names)."""
    import psutil

    for proc in psutil.process_iter(["name", "cmdline"]):
        named = f"--node-name={name}" in (proc.info["cmdline"] or [])
        if proc.info["name"] == "raylet" and named and _of_this_slot(proc):
            return proc
    return None


def _of_this_slot(proc) -> bool:
    """The process belongs to this slot's cluster (one started before slots, with no mark, is
    slot 0's)."""
    import psutil

    try:
        mark = proc.environ().get(MEMBER_ENV)
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    slot = str(local_instance().slot)
    return mark == slot or (mark is None and slot == "0")


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


GONE_TIMEOUT_S = 120.0  # Ray's health check marks a killed node dead within about 30 s


def wait_until_gone(names: set[str], what: str, timeout_s: float = GONE_TIMEOUT_S) -> None:
    """Until Ray no longer counts the nodes `names` alive: a host started again under the same
    name before that would be taken for the old one."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = alive_names()
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
    """This slot's processes whose environment sets `key` to one of `values`, and every
    process they started: a simulated host's raylet carries its env, and so do the agents and
    workers it starts, but those rename themselves (`ray::RayTrainWorker`), which overwrites
    what /proc shows of their environment, so they are found as the raylet's children.
    Collected before any is killed: a dead raylet's children are handed to init. Another
    slot's cluster has hosts of the same names: never one of its processes."""
    import psutil

    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(key) in values and _of_this_slot(proc):
                found[proc.pid] = proc
                found.update((child.pid, child) for child in proc.children(recursive=True))
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return list(found.values())


def kill_hosts(names: set[str]) -> int:
    """SIGKILLs every process of the simulated hosts `names`; returns how many."""
    import psutil

    victims = processes_with_env(HOST_ENV, names)
    for proc in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    return len(victims)
