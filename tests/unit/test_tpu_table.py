"""The TPU table: derived host counts, every spelling, and refusals that name the fix."""

from __future__ import annotations

import json

import pytest

from launcher import cli
from launcher.core.errors import UsageError
from launcher.core.tpu_table import GENERATIONS, as_json_table, shape_for_pod_type, slice_shape

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("accel", "topology", "hosts", "chips_per_host", "machine", "pod_type"),
    [
        ("v6e", "4x4", 4, 4, "ct6e-standard-4t", "v6e-16"),  # the GKE tutorial's slice
        ("TPU-V6E", "2x4", 1, 8, "ct6e-standard-8t", "v6e-8"),
        ("tpu-v6e-slice", "1x1", 1, 1, "ct6e-standard-1t", "v6e-1"),
        ("v5e", "4x8", 8, 4, "ct5lp-hightpu-4t", "v5litepod-32"),  # the Saxml tutorial's slice
        ("v5litepod", "2x2", 1, 4, "ct5lp-hightpu-4t", "v5litepod-4"),
        ("v5p", "2x2x2", 2, 4, "ct5p-hightpu-4t", "v5p-16"),  # v5p-16 counts cores
        ("v4", "2x2x4", 4, 4, "ct4p-hightpu-4t", "v4-32"),
    ],
)
def test_derives_hosts_machine_and_pod_type(
    accel, topology, hosts, chips_per_host, machine, pod_type
):
    shape = slice_shape(accel, topology)
    assert (shape.hosts, shape.chips_per_host, shape.machine_type, shape.pod_type) == (
        hosts,
        chips_per_host,
        machine,
        pod_type,
    )


def test_v6e_2x4_can_be_two_four_chip_hosts():
    shape = slice_shape("v6e", "2x4", chips_per_host=4)
    assert (shape.hosts, shape.machine_type) == (2, "ct6e-standard-4t")


def test_every_shape_multiplies_back_to_its_chips():
    for gen in GENERATIONS.values():
        for topo in gen.topologies:
            shape = slice_shape(gen.name, topo)
            assert shape.hosts * shape.chips_per_host == shape.chips


@pytest.mark.parametrize(
    ("accel", "topology", "chips", "field", "says"),
    [
        ("v7z", "4x4", None, "accelerator_type", "unknown TPU accelerator type 'v7z'"),
        ("v6e", "4x4x4", None, "topology", "not a v6e topology"),
        ("v5p", "4x4", None, "topology", "use one of 2x2x1"),
        ("v6e", "4x4", 8, "chips_per_host", "use chips per host 4"),
        ("v6e", "2x2", 1, "chips_per_host", "cannot be built from hosts of 1 chips"),
    ],
)
def test_refuses_what_gke_cannot_build(accel, topology, chips, field, says):
    with pytest.raises(UsageError) as err:
        slice_shape(accel, topology, chips)
    assert err.value.field == field
    assert says in str(err.value)


def test_pod_type_round_trips():
    for gen in GENERATIONS.values():
        for topo in gen.topologies:
            shape = slice_shape(gen.name, topo)
            assert shape_for_pod_type(shape.pod_type) == shape
    assert shape_for_pod_type("v9-8") is None


def test_json_export_matches_the_table_and_the_cli(capsys):
    assert cli.main(["tpu-table", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == json.loads(json.dumps(as_json_table()))
    v6e_2x4 = data["v6e"]["topologies"]["2x4"]["chipsPerHost"]
    assert v6e_2x4 == {
        "4": {"hosts": 2, "machineType": "ct6e-standard-4t"},
        "8": {"hosts": 1, "machineType": "ct6e-standard-8t"},
    }
    assert data["v5e"]["gkeAccelerator"] == "tpu-v5-lite-podslice"


def test_every_machine_type_has_a_size():
    from launcher.core.tpu_table import CPU_POOL_MACHINE, MACHINES

    named = {m for gen in GENERATIONS.values() for m in gen.machines.values()} | {CPU_POOL_MACHINE}
    assert named == set(MACHINES)
