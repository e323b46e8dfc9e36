"""The chart tier's shared fixture: the chart's NOTES, rendered.

NOTES are not rendered by `helm template`: `chart_with_notes` is a copy of the chart that renders
its own NOTES.txt through `tpl` into a ConfigMap (no cluster needed), the text `helm install`
prints; `notes` reads it for a values file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from harness.helm import BUCKET, CHART, VALUES, run_helm

NOTES_AS_CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
data:
  notes: {{ tpl (.Files.Get "files/notes.txt") . | quote }}
"""


@pytest.fixture(scope="module")
def chart_with_notes(tmp_path_factory) -> Path:
    chart = tmp_path_factory.mktemp("chart") / "tpu-stack"
    shutil.copytree(CHART, chart)
    shutil.copy(CHART / "templates" / "NOTES.txt", chart / "files" / "notes.txt")
    (chart / "templates" / "notes-as-configmap.yaml").write_text(NOTES_AS_CONFIGMAP)
    return chart


def notes(chart: Path, values: str, *sets: str) -> str:
    proc = run_helm(
        3, "template", "tpu", str(chart), "-f", str(VALUES / f"{values}.yaml"), *BUCKET, *sets,
        "--show-only", "templates/notes-as-configmap.yaml",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout)["data"]["notes"]
