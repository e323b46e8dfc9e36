"""`helm test`'s check: the Ray head answers and the expected number of nodes joined.

    python -m launcher.cluster_check --address http://<cluster>-head-svc:8265 --expect-nodes 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request

from launcher.cli import auth_headers


def alive_nodes(address: str) -> int:
    request = urllib.request.Request(f"{address.rstrip('/')}/nodes?view=summary",
                                     headers=auth_headers())
    with urllib.request.urlopen(request, timeout=10) as resp:
        body = json.load(resp)
    summary = body.get("data", {}).get("summary", [])
    return sum(1 for node in summary if node.get("raylet", {}).get("state") == "ALIVE")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--expect-nodes", type=int, required=True, help="head + workers")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.timeout
    seen, last_error = -1, ""
    while time.monotonic() < deadline:
        try:
            seen = alive_nodes(args.address)
            if seen == args.expect_nodes:
                print(f"ok: the Ray head at {args.address} answers; {seen} nodes alive")
                return 0
        except (urllib.error.URLError, OSError, ValueError) as e:
            last_error = str(getattr(e, "reason", e))
        time.sleep(3)
    what = (f"{seen} of {args.expect_nodes} nodes alive" if seen >= 0
            else f"no answer ({last_error})")
    print(f"FAILED: Ray head at {args.address}: {what} after {args.timeout:.0f}s; see "
          "`kubectl get pods -l ray.io/cluster` and the worker pods' events", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
