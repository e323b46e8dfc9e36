"""Reaching Ray's head: its dashboard's port (the job API) and token authentication, as Ray's
own clients find the token: RAY_AUTH_TOKEN, then the file named by RAY_AUTH_TOKEN_PATH, then
~/.ray/auth_token. Used by `tpu-launcher submit` on a workstation and, inside the cluster, by
`helm test`'s check and the idle-release sidecar."""

from __future__ import annotations

import os
from pathlib import Path

# Ray's dashboard port (`ray start --dashboard-port`'s default, the chart's head port): the job
# API, on the local cluster, through a release's port-forward, and from beside the head.
DASHBOARD_PORT = 8265


def auth_token() -> str | None:
    token = os.environ.get("RAY_AUTH_TOKEN")
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    if not token and os.path.isfile(path):
        token = Path(path).read_text().strip()
    return token or None


def auth_headers() -> dict[str, str]:
    token = auth_token()
    return {"Authorization": f"Bearer {token}"} if token else {}
