"""The TPU table: derived host counts, every spelling, and refusals that name the fix."""

from __future__ import annotations

import json

import pytest

from launcher import cli
from launcher.core.errors import UsageError
from launcher.core.tpu.table import GENERATIONS, as_json_table, slice_shape, tpu_type

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
        ("tpu7x", "2x2x2", 2, 4, "tpu7x-standard-4t", "v7x-16"),  # Ray spells Ironwood v7x
        ("TPU-V7X", "4x4x4", 16, 4, "tpu7x-standard-4t", "v7x-128"),
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


def test_pod_type_and_name_round_trip():
    for gen in GENERATIONS.values():
        for topo in gen.topologies:
            shape = slice_shape(gen.name, topo)
            assert tpu_type(shape.pod_type) == shape
            assert tpu_type(shape.name) == shape


def test_ironwood_counts_two_devices_per_chip():
    """Cloud TPU's "TPU7x (Ironwood)": 2 TensorCores per chip, each a JAX device (the pinned
    libtpu's get_topology_desc("tpu7x:2x2x2") gives 16 devices, 8 per process), 192 GiB HBM
    and 2,307 TFLOP/s bf16 per chip; tpu7x-16 is 2 VMs of 4 chips."""
    shape = tpu_type("tpu7x-16")
    assert (shape.name, shape.pod_type, shape.compile_topology) == (
        "tpu7x-16",
        "v7x-16",
        "tpu7x-16",
    )
    assert (shape.hosts, shape.chips_per_host, shape.chips) == (2, 4, 8)
    assert (shape.devices_per_host, shape.devices) == (8, 16)
    gen = shape.generation
    assert (gen.per_device(gen.hbm_gib), gen.per_device(gen.peak_bf16_tflops)) == (96, 1153.5)
    assert (gen.gke_accelerator, gen.ray_accelerator_type) == ("tpu7x", "TPU-V7X")
    # Chips and devices are one on every other generation (v4/v5p: megacore).
    assert all(g.devices_per_chip == 1 for g in GENERATIONS.values() if g is not gen)


def test_every_slice_is_a_maxtext_compile_topology_with_its_device_count():
    """MaxText's own table (the pinned maxtext's accelerator_to_spec_map), which preflight's
    compile_topology names: the same topology and as many devices."""
    from maxtext.utils.accelerator_to_spec_map import UserFacingNameToSystemCharacteristics

    for gen in GENERATIONS.values():
        for topo in gen.topologies:
            shape = slice_shape(gen.name, topo)
            spec = UserFacingNameToSystemCharacteristics[shape.compile_topology]
            assert spec.topology_name.split(":")[1] == topo, shape.compile_topology
            assert spec.devices_per_slice == shape.devices, shape.compile_topology


def test_every_slice_is_one_ray_knows_as_the_same_pod_type():
    """Ray's TPU tables (the pinned ray's _private/accelerators/tpu.py), which its slice
    reservation reads: the topology is valid, and the pod type and chips per host agree."""
    from ray._private.accelerators import tpu as ray_tpu

    for gen in GENERATIONS.values():
        for topo in gen.topologies:
            shape = slice_shape(gen.name, topo)
            manager = ray_tpu.TPUAcceleratorManager
            assert manager.is_valid_tpu_accelerator_topology(gen.ray_version, topo), shape.name
            pod_type = ray_tpu.infer_tpu_pod_type_from_topology(topo, gen.ray_accelerator_type)
            assert pod_type == shape.pod_type
            assert ray_tpu.normalize_tpu_accelerator_type(shape.name) == shape.pod_type
            assert ray_tpu.get_chips_per_host(topo, gen.ray_version) == shape.chips_per_host


@pytest.mark.parametrize(
    ("name", "chips", "hosts", "chips_per_host"),
    [
        ("v5p-16", 8, 2, 4),  # v4 and v5p names count TensorCores
        ("v4-16", 8, 2, 4),
        ("v4-8", 4, 1, 4),
        ("v6e-16", 16, 4, 4),  # v5e and v6e names count chips
        ("v6e-256", 256, 64, 4),
        ("v5litepod-32", 32, 8, 4),
        ("v5e-32", 32, 8, 4),
        ("V6E-8", 8, 1, 8),  # 2x4: one host of 8 by default
        ("tpu7x-16", 8, 2, 4),  # tpu7x names count TensorCores, as Cloud TPU and MaxText do
        ("v7x-16", 8, 2, 4),  # Ray's spelling
        ("tpu7x-8", 4, 1, 4),
    ],
)
def test_tpu_type_names_as_users_type_them(name, chips, hosts, chips_per_host):
    shape = tpu_type(name)
    assert (shape.chips, shape.hosts, shape.chips_per_host) == (chips, hosts, chips_per_host)


def test_a_tpu_type_with_two_host_sizes_takes_the_one_asked_for():
    assert tpu_type("v6e-8", chips_per_host=4).hosts == 2
    with pytest.raises(UsageError, match="cannot be built from hosts of 2 chips"):
        tpu_type("v6e-8", chips_per_host=2)


@pytest.mark.parametrize(
    ("name", "suggests"),
    [
        ("v6e-15", "v6e-8 or v6e-16"),
        ("v6e-20", "v6e-16 or v6e-32"),
        ("v6-16", "v6e-16"),
        ("v5p-8x", "v5p-8"),
        ("v5lite-32", "v5litepod-32"),
        ("xyz", "tpu-table"),
    ],
)
def test_an_unknown_tpu_type_names_the_closest_valid_ones(name, suggests):
    with pytest.raises(UsageError, match="unknown TPU type") as err:
        tpu_type(name)
    assert suggests in str(err.value) and "fix:" in str(err.value)


def test_json_export_matches_the_table_and_the_cli(capsys):
    assert cli.main(["tpu-table", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == json.loads(json.dumps(as_json_table()))
    v6e_2x4 = data["generations"]["v6e"]["topologies"]["2x4"]
    assert v6e_2x4["chipsPerHost"] == {
        "4": {"hosts": 2, "machineType": "ct6e-standard-4t"},
        "8": {"hosts": 1, "machineType": "ct6e-standard-8t"},
    }
    assert v6e_2x4["defaultChipsPerHost"] == 8  # one host where one machine holds the slice
    assert data["generations"]["v5e"]["gkeAccelerator"] == "tpu-v5-lite-podslice"
    # Cloud TPU's names: v5e is v5litepod-N (v5e-N accepted), v4/v5p count TensorCores.
    assert data["names"]["v5e-32"] == {
        "generation": "v5e",
        "canonical": "v5litepod-32",
        "topologies": ["4x8"],
    }
    assert data["names"]["v5p-16"]["topologies"] == ["2x2x2"]
    assert data["namesByPrefix"]["v6e"][:3] == ["v6e-1", "v6e-4", "v6e-8"]


def test_every_machine_type_has_a_size():
    from launcher.client.gke.plan import SYSTEM_MACHINE
    from launcher.client.gke.release import CPU_MACHINES
    from launcher.core.tpu.machines import CPU_POOL_MACHINE, MACHINES

    named = {m for gen in GENERATIONS.values() for m in gen.machines.values()}
    named |= {CPU_POOL_MACHINE, SYSTEM_MACHINE, *CPU_MACHINES}
    assert named == set(MACHINES)
