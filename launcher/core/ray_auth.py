"""Ray token authentication, as Ray's own clients find the token: RAY_AUTH_TOKEN, then the file
named by RAY_AUTH_TOKEN_PATH, then ~/.ray/auth_token. Used by `tpu-launcher submit` on a
workstation and by `helm test`'s check inside the cluster."""

from __future__ import annotations

import os
from pathlib import Path


def auth_token() -> str | None:
    token = os.environ.get("RAY_AUTH_TOKEN")
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    if not token and os.path.isfile(path):
        token = Path(path).read_text().strip()
    return token or None


def auth_headers() -> dict[str, str]:
    token = auth_token()
    return {"Authorization": f"Bearer {token}"} if token else {}
