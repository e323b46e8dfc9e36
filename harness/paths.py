"""Where things are in the checkout, and the pinned versions (ci/versions.env)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pins() -> dict[str, str]:
    lines = (REPO / "ci" / "versions.env").read_text().splitlines()
    return dict(ln.split("=", 1) for ln in lines if ln and not ln.startswith("#"))
