"""The tpu-launcher package's installed version, read in one place (`--version`, the chart a
client pulls, the skew against a release's image)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "tpu-launcher"


def installed_version() -> str | None:
    """None for a source tree that was never installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None
