"""A STAND-IN for GKE's TPU device plugin, one per simulated TPU host of the local cluster: the
Prometheus text the plugin serves on a TPU node (launcher.core.tpu.device_metrics), which Ray's own
reporter agent on that host scrapes (the host's TPU_DEVICE_PLUGIN_ADDR names it, as the KubeRay
TPU webhook does on GKE). No TPU runs here, so the figures stand in:

- duty cycle and TensorCore utilization: the share of the last interval the host's Ray workers
  spent on the CPU (its JAX devices are CPUs; 100% is a core busy), the same on each chip;
- HBM in use: the workers' resident memory, split over the chips; HBM in all: the TPU table's;
- `tpu-launcher local idle-chips --host N` holds a host's chips at 0 (what a host whose chips stop
  being fed reports), until `--off`.

Started by `up` before the hosts (an agent that cannot reach its plugin at first stops asking),
in one process serving each host on its own port; `down` stops it with the cluster.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from launcher.core.tpu.device_metrics import (
    DUTY_CYCLE,
    HOST_INDEXED,
    MEMORY_BANDWIDTH_UTILIZATION,
    MEMORY_TOTAL,
    MEMORY_USED,
    TENSORCORE_UTILIZATION,
)


@dataclass(frozen=True)
class SimulatedChips:
    """One simulated host's chips, as its device plugin names them."""

    host: str  # the local host's node name (its processes carry it in HOST_ENV)
    port: int
    worker_id: int
    chips: int
    model: str  # the GKE accelerator (tpu-v5p-slice)
    topology: str
    hbm_bytes: float  # per chip

    def to_json(self) -> dict:
        return self.__dict__.copy()


def holds_dir(ray_session: Path) -> Path:
    """Where `idle-chips` leaves a host's hold: the Ray session's own directory."""
    return ray_session / "tpu-launcher-device-holds"


@dataclass
class _Usage:
    """The host's Ray workers' CPU time and memory, read at each scrape."""

    host: str
    cpu_seconds: float = 0.0
    at: float = field(default_factory=time.monotonic)
    busy_pct: float = 0.0
    rss_bytes: float = 0.0

    def sample(self) -> None:
        import psutil

        from launcher.client.local.layout import HOST_ENV
        from launcher.client.local.nodes import processes_with_env

        cpu = rss = 0.0
        for proc in processes_with_env(HOST_ENV, {self.host}):
            try:
                if not (proc.cmdline() or [""])[0].startswith("ray::"):
                    continue  # the raylet and its agents: not the host's work
                times = proc.cpu_times()
                cpu += times.user + times.system
                rss += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue  # gone while it was read
        now = time.monotonic()
        if now > self.at and cpu >= self.cpu_seconds:
            self.busy_pct = min(100.0, 100.0 * (cpu - self.cpu_seconds) / (now - self.at))
        elif cpu < self.cpu_seconds:  # new workers: no interval to measure yet
            self.busy_pct = 0.0
        self.cpu_seconds, self.at, self.rss_bytes = cpu, now, rss


def metrics_text(chips: SimulatedChips, duty: float, rss_bytes: float) -> str:
    """The device plugin's exposition for one host: per chip, its host-indexed and its
    slice-indexed series (launcher.core.tpu.device_metrics)."""
    lines = []
    accelerator = 4804690994094478883 + chips.worker_id  # any id: the agent keeps its suffix
    for name, value in (
        (TENSORCORE_UTILIZATION, duty),
        (MEMORY_BANDWIDTH_UTILIZATION, duty),
        (DUTY_CYCLE, duty),
        (MEMORY_USED, rss_bytes / chips.chips),
        (MEMORY_TOTAL, chips.hbm_bytes),
    ):
        lines.append(f"# TYPE {name} gauge")
        for chip in range(chips.chips):
            index = chip if name in HOST_INDEXED else (chips.worker_id * chips.chips + chip)
            labels = (
                f'accelerator_id="{accelerator}-{index}",make="cloud-tpu",'
                f'model="{chips.model}",tpu_topology="{chips.topology}"'
            )
            lines.append(f"{name}{{{labels}}} {float(value)!r}")
    return "\n".join(lines) + "\n"


def handler(chips: SimulatedChips, usage: _Usage, ray_session: Path) -> type:
    """The HTTP handler that serves one host's /metrics."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/metrics":
                self.send_error(404)
                return
            usage.sample()
            held = (holds_dir(ray_session) / chips.host).exists()
            body = metrics_text(chips, 0.0 if held else usage.busy_pct, usage.rss_bytes).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:  # the agent asks every 5 s
            pass

    return Handler


def serve(hosts: list[SimulatedChips], ray_session: Path) -> None:
    """Serves every host on its port until killed."""
    for chips in hosts:
        server = ThreadingHTTPServer(
            ("127.0.0.1", chips.port), handler(chips, _Usage(chips.host), ray_session)
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    serve([SimulatedChips(**h) for h in spec["hosts"]], Path(spec["ray_session"]))
