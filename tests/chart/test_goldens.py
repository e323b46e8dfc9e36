"""Every template change is readable in review: the chart rendered with each values file equals
its golden (tests/chart/goldens/, `make goldens` rewrites them)."""

from __future__ import annotations

import difflib

import pytest
import yaml

from harness.helm import VALUES_FILES
from tests.support.goldens import GOLDENS, golden_path, render_golden

pytestmark = pytest.mark.chart


@pytest.mark.parametrize("values", VALUES_FILES, ids=[v.name for v in VALUES_FILES])
def test_render_equals_its_golden(values):
    path = golden_path(values)
    assert path.is_file(), f"{path} is missing: run `make goldens`"
    rendered, golden = render_golden(values), path.read_text()
    diff = "".join(
        difflib.unified_diff(
            golden.splitlines(True), rendered.splitlines(True), str(path), "helm template", n=2
        )
    )
    assert not diff, f"the render differs from its golden (run `make goldens` if intended):\n{diff}"


def test_every_golden_has_its_values_file():
    assert {p.name for p in GOLDENS.glob("*.yaml")} == {v.name for v in VALUES_FILES}


@pytest.mark.parametrize("values", VALUES_FILES, ids=[v.name for v in VALUES_FILES])
def test_two_renders_are_the_same_and_carry_no_secret(values):
    """What a GitOps tool (Argo CD's `helm template`) applies on every sync: if a render held a
    fresh random token, each sync would rotate it and workers started after could not join."""
    first, second = render_golden(values), render_golden(values)
    assert first == second
    assert "Secret" not in {d["kind"] for d in yaml.safe_load_all(first) if d}


def test_a_template_change_shows_in_the_diff(tmp_path, monkeypatch):
    """The check can fail: a chart with one edited template no longer equals the goldens."""
    import shutil

    from harness import helm
    from tests.support import goldens

    chart = tmp_path / "tpu-stack"
    shutil.copytree(helm.CHART, chart)
    template = chart / "templates" / "ray" / "_cluster.tpl"
    template.write_text(template.read_text().replace("numOfHosts:", "numOfHosts: 7 #", 1))
    monkeypatch.setattr(goldens, "CHART", chart)
    values = next(v for v in VALUES_FILES if v.name == "v6e-16.yaml")
    assert render_golden(values) != golden_path(values).read_text()
