"""A real Prometheus beside the local Ray cluster: it finds every node's metrics agent through
Ray's own service-discovery file (as Ray's docs set Prometheus up) and answers the same HTTP API
and PromQL as GKE's managed Prometheus, so the chart's dashboard queries can be tried here.

`tpu-launcher up --prometheus` starts it (`make up` does), `tpu-launcher down` stops it. The
binary is `prometheus` on PATH, or the one PROMETHEUS names (`make prometheus` unpacks Debian's
package into .tools and the Makefile puts it on PATH)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from launcher.client.local.instance import local_instance
from launcher.core.errors import UsageError

SCRAPE_EVERY = "5s"  # Ray's agents export every 10 s: every value a job reports is seen
READY_TIMEOUT_S = 60.0


def port() -> int:
    """This local cluster slot's Prometheus port (9090 for the user's)."""
    return local_instance().prometheus_port


def address() -> str:
    return f"http://127.0.0.1:{port()}"


def ray_targets() -> Path:
    """Where Ray's dashboard writes every node's metrics agent address (and keeps it current)."""
    return local_instance().ray_dir / "prom_metrics_service_discovery.json"


def state_file() -> Path:
    """Outlives Ray's sessions: a new cluster under the same Prometheus is found by the same
    service-discovery file."""
    return local_instance().ray_dir / "tpu-launcher-prometheus.json"


def scrape_config() -> str:
    return f"""# Written by tpu-launcher up --prometheus: the local Ray cluster's metrics agents.
global:
  scrape_interval: {SCRAPE_EVERY}
  evaluation_interval: {SCRAPE_EVERY}
scrape_configs:
  - job_name: ray
    file_sd_configs:
      - files: ["{ray_targets()}"]
        refresh_interval: {SCRAPE_EVERY}
"""


def binary() -> str:
    found = os.environ.get("PROMETHEUS") or shutil.which("prometheus")
    if not found:
        raise UsageError(
            "--prometheus",
            "no Prometheus to start: neither PROMETHEUS nor `prometheus` on PATH",
            "`make prometheus` (Debian's package into .tools; `make up` puts it on PATH), or "
            "install Prometheus and put it on PATH",
        )
    return found


def is_ready() -> bool:
    try:
        with urllib.request.urlopen(f"{address()}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def up(data_dir: Path) -> None:
    """Starts Prometheus on 127.0.0.1:<this slot's port> with its data in `data_dir`, unless
    one answers."""
    if is_ready():
        print(f"Prometheus already running: {address()}")
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "prometheus.yml"
    config.write_text(scrape_config())
    log = (data_dir / "prometheus.log").open("ab")
    argv = [
        binary(),
        f"--config.file={config}",
        f"--storage.tsdb.path={data_dir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port()}",
    ]
    # Its own session: it outlives this command, as the Ray cluster does, until `down`.
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    state_file().parent.mkdir(parents=True, exist_ok=True)
    state_file().write_text(json.dumps({"pid": proc.pid, "data_dir": str(data_dir)}))
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not is_ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            state_file().unlink(missing_ok=True)
            tail = (data_dir / "prometheus.log").read_text(errors="replace")[-2000:]
            raise UsageError(
                "--prometheus",
                f"Prometheus did not become ready on {address()} within {READY_TIMEOUT_S:g} s:\n"
                + tail,
                f"is port {port()} taken? (`ss -ltnp | grep {port()}`); its log: "
                f"{data_dir / 'prometheus.log'}",
            )
        time.sleep(0.5)
    print(f"Prometheus up: {address()} (scrapes the cluster's metrics agents every {SCRAPE_EVERY})")


def down() -> bool:
    """Stops the Prometheus `up` started; True when there was one."""
    if not state_file().exists():
        return False
    pid = json.loads(state_file().read_text())["pid"]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
        for _ in range(100):  # it writes its head block out first: up to 10 s
            os.kill(pid, 0)
            time.sleep(0.1)
        os.killpg(pid, signal.SIGKILL)
    state_file().unlink(missing_ok=True)
    return True
