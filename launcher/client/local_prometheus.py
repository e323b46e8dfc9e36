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

from launcher.core.errors import UsageError

PORT = 9090
ADDRESS = f"http://127.0.0.1:{PORT}"
# Ray's dashboard writes every node's metrics agent address here (and keeps it current).
RAY_TARGETS = "/tmp/ray/prom_metrics_service_discovery.json"
# Outlives Ray's sessions: a new cluster under the same Prometheus is found by the same file.
STATE_FILE = Path("/tmp/ray/tpu-launcher-prometheus.json")
SCRAPE_EVERY = "5s"  # Ray's agents export every 10 s: every value a job reports is seen
READY_TIMEOUT_S = 60.0

CONFIG = f"""# Written by tpu-launcher up --prometheus: the local Ray cluster's metrics agents.
global:
  scrape_interval: {SCRAPE_EVERY}
  evaluation_interval: {SCRAPE_EVERY}
scrape_configs:
  - job_name: ray
    file_sd_configs:
      - files: ["{RAY_TARGETS}"]
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
        with urllib.request.urlopen(f"{ADDRESS}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def up(data_dir: Path) -> None:
    """Starts Prometheus on 127.0.0.1:9090 with its data in `data_dir`, unless one answers."""
    if is_ready():
        print(f"Prometheus already running: {ADDRESS}")
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "prometheus.yml"
    config.write_text(CONFIG)
    log = (data_dir / "prometheus.log").open("ab")
    argv = [
        binary(),
        f"--config.file={config}",
        f"--storage.tsdb.path={data_dir / 'data'}",
        f"--web.listen-address=127.0.0.1:{PORT}",
    ]
    # Its own session: it outlives this command, as the Ray cluster does, until `down`.
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    STATE_FILE.write_text(json.dumps({"pid": proc.pid, "data_dir": str(data_dir)}))
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not is_ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            STATE_FILE.unlink(missing_ok=True)
            tail = (data_dir / "prometheus.log").read_text(errors="replace")[-2000:]
            raise UsageError(
                "--prometheus",
                f"Prometheus did not become ready on {ADDRESS} within {READY_TIMEOUT_S:g} s:\n"
                + tail,
                f"is port {PORT} taken? (`ss -ltnp | grep {PORT}`); its log: "
                f"{data_dir / 'prometheus.log'}",
            )
        time.sleep(0.5)
    print(f"Prometheus up: {ADDRESS} (scrapes the cluster's metrics agents every {SCRAPE_EVERY})")


def down() -> bool:
    """Stops the Prometheus `up` started; True when there was one."""
    if not STATE_FILE.exists():
        return False
    pid = json.loads(STATE_FILE.read_text())["pid"]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
        for _ in range(100):  # it writes its head block out first: up to 10 s
            os.kill(pid, 0)
            time.sleep(0.1)
        os.killpg(pid, signal.SIGKILL)
    STATE_FILE.unlink(missing_ok=True)
    return True
