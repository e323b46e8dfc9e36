"""`helm test`'s check: the Ray head answers and the expected number of nodes joined.

tpu-launcher cluster-check --address http://<cluster>-head-svc:8265 --expect-nodes 5
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

from launcher.core.ray_auth import auth_headers


def alive_nodes(address: str) -> int:
    request = urllib.request.Request(
        f"{address.rstrip('/')}/nodes?view=summary", headers=auth_headers()
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        body = json.load(resp)
    summary = body.get("data", {}).get("summary", [])
    return sum(1 for node in summary if node.get("raylet", {}).get("state") == "ALIVE")


def check(address: str, expect_nodes: int, timeout: float = 300) -> int:
    """0 once `expect_nodes` nodes (head + workers) are alive; 1 after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    seen, last_error = -1, ""
    while time.monotonic() < deadline:
        try:
            seen = alive_nodes(address)
            if seen == expect_nodes:
                print(f"ok: the Ray head at {address} answers; {seen} nodes alive")
                return 0
        except (urllib.error.URLError, OSError, ValueError) as e:
            last_error = str(getattr(e, "reason", e))
        time.sleep(3)
    what = f"{seen} of {expect_nodes} nodes alive" if seen >= 0 else f"no answer ({last_error})"
    print(
        f"FAILED: Ray head at {address}: {what} after {timeout:.0f}s; see "
        "`kubectl get pods -l ray.io/cluster` and the worker pods' events",
        file=sys.stderr,
    )
    return 1
