"""The chart's Chart.yaml as the client reads it, in one place: its name, its version (the
chart's and the client's, released together) and its appVersion (the launcher image's tag it
was packaged for)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class ChartMeta:
    name: str
    version: str
    app_version: str

    @property
    def packaged_for(self) -> str | None:
        """The image tag the chart was packaged for (`image` pushes it with its appVersion set
        to the tag it pushed), or None for a chart whose appVersion is its own version."""
        return self.app_version if self.app_version != self.version else None


def chart_meta(chart: Path) -> ChartMeta:
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    return ChartMeta(str(meta["name"]), str(meta["version"]), str(meta["appVersion"]))
