"""The local cluster's own bookkeeping against its live Ray: which simulated hosts are alive,
and the wait of `up` and `slice-up` for a node whose registration outlasts `ray start`'s fixed
30 s (a busy machine), made real here by holding a new node's raylet longer than that."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time

import psutil
import pytest

from launcher.client.local.cluster import nodes_file, running_slices, start_host
from launcher.client.local.nodes import alive_hosts
from launcher.core.tpu.slices import LABEL_SLICE, LABEL_WORKER_ID

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_the_gcs_names_each_live_simulated_host_by_slice_and_worker(local_cluster):
    assert running_slices() >= 1
    started = json.loads(nodes_file().read_text())["nodes"]  # what `up` started
    expected = {(n["labels"][LABEL_SLICE], n["labels"][LABEL_WORKER_ID]) for n in started}
    assert ("local-slice-0", "1") in expected
    assert alive_hosts() == expected


MARKER = "LAUNCHER_TEST_NODE"  # in a test node's env: finds its processes


def _hold_raylet(marker: str, seconds: float, held: list) -> None:
    """Suspends the raylet `ray start` launches for the node marked `marker` (in its env) as
    soon as it appears, for `seconds`: the node cannot register meanwhile, as on a machine too
    busy to run it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for proc in psutil.process_iter(["name"]):
            with contextlib.suppress(psutil.Error):
                if proc.info["name"] == "raylet" and proc.environ().get(MARKER) == marker:
                    proc.suspend()
                    held.append(proc)
                    time.sleep(seconds)
                    proc.resume()
                    return
        time.sleep(0.2)


@pytest.mark.timeout(300)
def test_a_node_slower_to_register_than_rays_30_s_is_waited_for(local_cluster, capsys):
    """The new node's raylet held (SIGSTOP) for 34 s: `ray start` gives up after its fixed
    30 s, the node registers once the raylet runs again, and the start waits for it."""
    node = {"name": "slow-host", "resources": {"slow": 1}, "labels": {}, "env": {MARKER: "slow"}}
    held: list = []
    holder = threading.Thread(target=_hold_raylet, args=("slow", 34, held), daemon=True)
    holder.start()
    try:
        start_host(20, node, local_cluster.bucket, 128, dry_run=False)
    finally:
        holder.join(timeout=60)
        for proc in psutil.process_iter():  # the extra node goes; the cluster stays as it was
            with contextlib.suppress(psutil.Error):
                if proc.environ().get(MARKER) == "slow":
                    proc.kill()
    assert held, "the test never found the new node's raylet to hold"
    out = capsys.readouterr().out
    assert "stopped waiting for it to register (Ray's fixed 30 s)" in out, out
    registered = re.search(r"registered after (\d+) s", out)
    assert registered and int(registered[1]) >= 30, out
