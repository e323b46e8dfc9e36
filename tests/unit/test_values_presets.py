"""`-f/--values` as every command reads it: a path, or a preset's name (the files of values/,
shipped in the package), merged in Helm's order; a missing file or bad YAML named with the file
and its line, never a traceback."""

from __future__ import annotations

import os

import pytest

from harness.paths import REPO
from launcher.client.release.values_presets import preset_names, resolve_values
from launcher.core.errors import UsageError
from launcher.core.values_file import load_values

pytestmark = pytest.mark.unit


def test_every_values_file_is_a_preset():
    assert preset_names() == sorted(p.stem for p in (REPO / "values").glob("*.yaml"))


def test_a_preset_is_named_without_a_path_and_a_path_still_works(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for word in ("v6e-16", "v6e-16.yaml"):
        assert os.path.samefile(resolve_values(word), REPO / "values" / "v6e-16.yaml")
    own = tmp_path / "mine.yaml"
    own.write_text("ray: {}\n")
    assert resolve_values(str(own)) == str(own)
    (tmp_path / "v6e-16").write_text("ray: {}\n")  # a file of the preset's name wins: it is named
    assert resolve_values("v6e-16") == "v6e-16"


@pytest.mark.parametrize(
    ("word", "says", "fix"),
    [
        ("v6e-61", "no values file v6e-61 here, and no preset of that name", "did you mean v6e-16"),
        (
            "values/v6e-16.yaml",
            "no values file values/v6e-16.yaml",
            "needs no path: --values v6e-16",
        ),
        ("nosuch", "no preset of that name", "a preset: cpu, "),
    ],
)
def test_a_name_that_is_neither_is_refused_with_the_presets(tmp_path, monkeypatch, word, says, fix):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as refused:
        resolve_values(word)
    assert refused.value.field == "--values" and says in refused.value.problem
    assert fix in refused.value.fix


def test_yaml_errors_name_the_file_and_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("ray:\n  worker:\n    tpu:\n   type: v6e-16\n")
    with pytest.raises(UsageError) as refused:
        load_values(REPO / "charts/tpu-stack/values.yaml", bad)
    assert f"{bad}:4:" in refused.value.problem and "not valid YAML" in refused.value.problem
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(UsageError, match="holds a list, not a map"):
        load_values(listed)
    with pytest.raises(UsageError, match="no values file"):
        load_values(tmp_path / "missing.yaml")


def test_files_merge_as_helm_merges_them(tmp_path):
    override = tmp_path / "o.yaml"
    override.write_text("ray:\n  worker:\n    terminationGracePeriodSeconds: 40\n")
    merged = load_values(REPO / "values/v6e-16-x2.yaml", override)
    assert merged["ray"]["worker"]["tpu"]["slices"] == 2  # kept from the first
    assert merged["ray"]["worker"]["terminationGracePeriodSeconds"] == 40  # the later one's
