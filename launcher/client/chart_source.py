"""Where the tpu-stack chart and the launcher image's sources are, for the commands that
render, plan or build: the chart travels inside the installed package (the wheel's build puts
it at launcher/chart); a clone runs its own charts/tpu-stack and builds the image from itself."""

from __future__ import annotations

import os
from pathlib import Path

import launcher
from launcher.client.image_tag import DOCKERFILE
from launcher.core.errors import UsageError


def packaged_chart() -> Path:
    """The chart of this launcher's version: inside the installed package (launcher/chart, put
    there by the wheel's build), or the checkout's charts/tpu-stack when run from a clone."""
    package = Path(launcher.__file__).resolve().parent
    for chart in (package / "chart", package.parent / "charts" / "tpu-stack"):
        if (chart / "Chart.yaml").is_file():
            # Relative where it can be, so a printed command runs from the same directory.
            if Path.cwd() in chart.parents:
                return Path(os.path.relpath(chart))
            return chart
    raise UsageError(
        "--chart",
        f"no tpu-stack chart in this installation of the launcher ({package})",
        "reinstall the tpu-launcher package, or pass --chart <dir of the tpu-stack chart>",
    )


def checkout(chart: str) -> Path | None:
    """The repository root the chart sits in, if it is a checkout the image builds from."""
    root = Path(chart).resolve().parents[1]
    return root if (root / DOCKERFILE).is_file() else None
