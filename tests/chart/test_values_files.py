"""Each values file states its TPU numbers explicitly; each is held to the launcher's table, and
the chart's copy of the table is the launcher's, regenerated, not edited by hand."""

from __future__ import annotations

import json

import pytest
import yaml

from launcher.client.ray_jobs import ENTRYPOINT
from launcher.core.tpu_table import as_json_table, slice_shape
from launcher.core.values_file import tpu_blocks
from tests.support.helm import CHART, VALUES_FILES

pytestmark = pytest.mark.chart

NUMBERS = (
    "generation",
    "gkeAccelerator",
    "topology",
    "machineType",
    "chipsPerHost",
    "hostsPerSlice",
    "slices",
)


@pytest.mark.parametrize("path", VALUES_FILES, ids=lambda p: p.name)
def test_values_file_numbers_agree_with_the_tpu_table(path):
    values = yaml.safe_load(path.read_text())
    for where, tpu in tpu_blocks(values).items():
        missing = [k for k in NUMBERS if k not in tpu]
        assert not missing, f"{path.name} {where} leaves {missing} to the defaults"
        shape = slice_shape(tpu["generation"], tpu["topology"], tpu["chipsPerHost"])
        assert tpu["gkeAccelerator"] == shape.generation.gke_accelerator
        assert tpu["machineType"] == shape.machine_type
        assert tpu["hostsPerSlice"] == shape.hosts


def test_cpu_values_file_keeps_several_hosts():
    values = yaml.safe_load((CHART.parents[1] / "values" / "cpu.yaml").read_text())
    assert values["ray"]["worker"]["tpu"]["enabled"] is False
    assert values["ray"]["worker"]["cpu"]["hosts"] > 1


def test_chart_defaults_are_a_valid_slice():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for tpu in (values["ray"]["worker"]["tpu"], values["saxml"]["modelServer"]["tpu"]):
        shape = slice_shape(tpu["generation"], tpu["topology"], tpu["chipsPerHost"])
        assert (tpu["hostsPerSlice"], tpu["machineType"]) == (shape.hosts, shape.machine_type)


def test_chart_table_is_the_launchers_table():
    shipped = json.loads((CHART / "files" / "tpu-table.json").read_text())
    assert shipped == json.loads(json.dumps(as_json_table())), (
        "charts/tpu-stack/files/tpu-table.json is stale: run `make chart-table`"
    )


def test_the_charts_job_command_is_what_submit_sends():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["ray"]["launcher"]["command"] == ENTRYPOINT
