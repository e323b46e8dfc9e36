"""Where the tpu-stack chart and the launcher image's sources are, for the commands that
render, plan or build: the chart travels inside the installed package (the wheel's build puts
it at launcher/chart); a clone runs its own charts/tpu-stack. The image's sources:
launcher.client.release.image_tag."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import launcher
from launcher.client.commands import run
from launcher.client.release.chart_meta import chart_meta
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


OCI = "oci://"


def chart_repository(image_repository: tuple[str, str]) -> str:
    """Where the chart is pushed: the OCI repository beside the launcher image (the image's
    registry and path less the image's name), as Artifact Registry keeps Helm charts in a
    Docker-format repository ("Store Helm charts in Artifact Registry")."""
    host, path = image_repository
    return f"{OCI}{host}/{path.rpartition('/')[0]}".rstrip("/")


def client_version() -> str:
    """The installed package's version; a source tree never installed: its chart's."""
    from launcher.core.package_version import installed_version

    return installed_version() or chart_meta(packaged_chart()).version


def pulled_chart(ref: str, version: str | None, helm: str) -> Path:
    """A chart in an OCI registry (`oci://host/path/tpu-stack`), pulled into a directory kept
    until the command ends; its version is this client's unless one is named."""
    destination = Path(tempfile.mkdtemp(prefix="tpu-stack-chart-"))
    atexit.register(shutil.rmtree, destination, True)
    version = version or client_version()
    argv = [helm, "pull", ref, "--version", version, "--untar", "--destination", str(destination)]
    run(f"pull the chart {ref} {version}", argv, capture=True)
    (chart,) = [p.parent for p in destination.glob("*/Chart.yaml")]
    return chart
