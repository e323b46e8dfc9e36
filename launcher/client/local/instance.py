"""Which local Ray cluster a command means: its ports and Ray's state directory on this machine.

Two can run side by side: a user's (slot 0: Ray's default ports and state directory) and, say,
the test suite's (LAUNCHER_LOCAL_SLOT=1), so `make test` neither adopts nor stops the cluster
`make demo` left running, and the demo's jobs are still there afterwards. A slot's ports are
apart from every other slot's and from Ray's worker ports (10002-19999); its Ray state lives
under its own root (Ray's own RAY_TMPDIR, which every process the cluster starts inherits, so
`ray.init("auto")` in a job finds its own cluster). Every process a slot starts carries the slot
in its environment (MEMBER_ENV): `down` stops those, never another slot's, nor a client's
(`ray stop` would stop them all).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from launcher.core.errors import UsageError
from launcher.core.ray_auth import DASHBOARD_PORT

SLOT_ENV = "LAUNCHER_LOCAL_SLOT"  # which cluster a command means (a client's)
# Set on the cluster's own processes only (never a client's): what `down` stops.
MEMBER_ENV = "LAUNCHER_LOCAL_CLUSTER_SLOT"
MAX_SLOT = 9
RAY_TMPDIR = "RAY_TMPDIR"  # Ray's own: the root of its state directory (`<root>/ray`)
# Ray swaps 127.0.0.1 for the machine's network address; another loopback address it keeps,
# so the whole cluster stays on loopback.
NODE_IP = "127.0.0.2"
_HEAD_PORT = 6379  # Ray's default GCS port
_CLIENT_PORT = 10001  # Ray's default client server port, just below its worker ports
_PROMETHEUS_PORT = 9090
# Each node on one machine needs its own agent ports: above Ray's worker ports (10002-19999)
# and below Linux's ephemeral ports (32768-60999), where any outgoing connection may hold one
# just when a host starts again and its agent must bind it. 10 per node, 100 per slot.
_AGENT_PORT_BASE = 20400


@dataclass(frozen=True)
class LocalInstance:
    slot: int

    @property
    def head_port(self) -> int:
        return _HEAD_PORT + self.slot

    @property
    def head_address(self) -> str:
        """The GCS address (`ray start --address`, `ray.init`)."""
        return f"{NODE_IP}:{self.head_port}"

    @property
    def dashboard_port(self) -> int:
        return DASHBOARD_PORT + self.slot

    @property
    def dashboard_address(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def client_port(self) -> int:
        return _CLIENT_PORT - self.slot

    @property
    def prometheus_port(self) -> int:
        return _PROMETHEUS_PORT + self.slot

    def node_ports(self, index: int) -> list[str]:
        """`ray start`'s agent ports for node `index` (0: the head)."""
        base = _AGENT_PORT_BASE + 100 * self.slot + 10 * index
        return [
            f"--dashboard-agent-listen-port={base}",
            f"--dashboard-agent-grpc-port={base + 1}",
            f"--metrics-export-port={base + 2}",
            f"--runtime-env-agent-port={base + 3}",
        ]

    def device_plugin_port(self, index: int) -> int:
        """The device plugin stand-in's port for node `index` (a simulated TPU host)."""
        return _AGENT_PORT_BASE + 100 * self.slot + 10 * index + 4

    @property
    def tmp_root(self) -> str:
        """Ray's RAY_TMPDIR for this slot: Ray's own default for slot 0 (its rule, in
        ray._common.utils.get_default_system_temp_dir), a directory of its own otherwise."""
        if self.slot == 0 or os.environ.get(RAY_TMPDIR):
            if RAY_TMPDIR in os.environ:
                return os.environ[RAY_TMPDIR]
            if sys.platform.startswith("linux") and "TMPDIR" in os.environ:
                return os.environ["TMPDIR"]
            return "/tmp"
        return f"/tmp/tpu-launcher-{self.slot}"  # short: Ray's socket paths live under it

    @property
    def ray_dir(self) -> Path:
        """Ray's state directory: its sessions, logs and service-discovery file."""
        return Path(self.tmp_root) / "ray"

    @property
    def memory_root(self) -> Path:
        """Where the simulated hosts' memory volumes are (the memory checkpoint tier): Linux's
        /dev/shm, a tmpfs, where there is one (a TPU pod's emptyDir of medium Memory is one)."""
        shm = Path("/dev/shm")
        return (shm if shm.is_dir() else Path(self.tmp_root)) / f"tpu-launcher-memory-{self.slot}"

    @property
    def env(self) -> dict[str, str]:
        """What every process of this cluster is started with: its slot (for the commands its
        jobs run), its membership (for `down`), Ray's state root, and its own GCS address
        (Ray's `auto` would find every cluster on the machine, warn on each call and take the
        latest started)."""
        slot = str(self.slot)
        return {
            SLOT_ENV: slot,
            MEMBER_ENV: slot,
            RAY_TMPDIR: self.tmp_root,
            "RAY_ADDRESS": self.head_address,
        }


def local_instance() -> LocalInstance:
    """The slot LAUNCHER_LOCAL_SLOT names (default 0: the user's cluster)."""
    raw = os.environ.get(SLOT_ENV, "0") or "0"
    if not raw.isdigit() or int(raw) > MAX_SLOT:
        raise UsageError(
            SLOT_ENV, f"is {raw!r}", f"a local cluster slot: 0 (the default) to {MAX_SLOT}"
        )
    return LocalInstance(int(raw))
