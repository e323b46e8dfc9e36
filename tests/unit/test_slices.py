"""Slices from flags and from a Ray cluster's nodes, and the ScalingConfig they imply."""

from __future__ import annotations

import pytest

from launcher.core.errors import UsageError
from launcher.core.tpu import slices
from tests.support.ray_nodes import ray_nodes

pytestmark = pytest.mark.unit


def test_the_tutorial_slice_gives_its_scaling_config():
    chosen = slices.from_flags("v6e", "4x4", 1, None, None, None)
    sc = chosen.scaling_config()
    assert (
        sc.use_tpu,
        sc.num_workers,
        sc.topology,
        sc.accelerator_type,
        sc.resources_per_worker,
        sc.placement_strategy,
    ) == (True, 4, "4x4", "TPU-V6E", {"TPU": 4}, "SPREAD")


def test_multislice_workers_are_hosts_times_slices():
    chosen = slices.from_flags("v6e", "4x4", 2, None, None, None)
    assert (chosen.num_workers, chosen.num_devices, chosen.devices_per_slice) == (8, 32, 16)


def test_cpu_slice_uses_plain_workers():
    chosen = slices.from_flags(None, None, 1, None, 2, 2)
    sc = chosen.scaling_config()
    assert (sc.use_tpu, sc.num_workers, chosen.num_devices) == (False, 2, 4)


def test_no_flags_means_the_cluster_decides():
    assert slices.from_flags(None, None, 1, None, None, None) is None


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("v6e", None, 1, None, None, None), "topology"),
        ((None, "4x4", 1, None, None, None), "accelerator_type"),
        (("v6e", "4x4", 0, None, None, None), "num_slices"),
        (("v6e", "4x4", 1, None, 2, 2), "cpu_hosts"),
        ((None, None, 1, None, 2, None), "cpu_hosts"),
    ],
)
def test_refuses_incomplete_or_conflicting_flags(args, field):
    with pytest.raises(UsageError) as err:
        slices.from_flags(*args)
    assert err.value.field == field


def test_reads_the_slice_from_the_cluster():
    found = slices.from_cluster_nodes(ray_nodes("v6e", "4x4", num_slices=2))
    assert (found.shape.pod_type, found.num_slices, found.num_workers) == ("v6e-16", 2, 8)


def test_an_incomplete_slice_is_named_with_the_fix():
    with pytest.raises(UsageError, match="has 3 of its 4 hosts"):
        slices.from_cluster_nodes(ray_nodes("v6e", "4x4", drop=1))


def test_a_cluster_without_tpus_needs_flags():
    with pytest.raises(UsageError, match="no TPU nodes"):
        slices.from_cluster_nodes(ray_nodes()[:1])


def test_asking_for_more_than_the_cluster_has_fails_early():
    chosen = slices.from_flags("v6e", "4x4", 2, None, None, None)
    with pytest.raises(UsageError, match="offers v6e-16"):
        slices.check_fits_cluster(chosen, ray_nodes("v6e", "4x4"))
    slices.check_fits_cluster(chosen, ray_nodes("v6e", "4x4", num_slices=2))


def test_the_tpu_flag_names_the_slice_as_users_do():
    by_name = slices.from_flags(None, None, 2, None, None, None, tpu="v6e-16")
    assert by_name == slices.from_flags("v6e", "4x4", 2, None, None, None)
    assert slices.from_flags("v6e", "4x4", 1, None, None, None, tpu="v6e-16").num_workers == 4


@pytest.mark.parametrize(
    ("long_form", "says"),
    [
        (("v5p", None), "v6e-16 is TPU v6e 4x4, but --accelerator_type=v5p"),
        ((None, "2x4"), "v6e-16 is TPU v6e 4x4, but --accelerator_type=None --topology=2x4"),
    ],
)
def test_the_tpu_flag_and_a_disagreeing_long_form_are_refused(long_form, says):
    with pytest.raises(UsageError, match="say otherwise") as err:
        slices.from_flags(*long_form, 1, None, None, None, tpu="v6e-16")
    assert says in str(err.value)
    with pytest.raises(UsageError, match="a CPU slice and a TPU slice"):
        slices.from_flags(None, None, 1, None, 2, 2, tpu="v6e-16")


def test_a_values_blocks_slice_is_its_name_and_its_choices():
    from launcher.core.values_file import block_shape

    assert block_shape({"type": "v6e-8"}).hosts == 1
    assert block_shape({"type": "v6e-8", "chipsPerHost": 4}).hosts == 2
    assert block_shape({"generation": "v5p", "topology": "2x2x2"}).pod_type == "v5p-16"
    with pytest.raises(UsageError, match="'2x4' is not a shape of v6e-16"):
        block_shape({"type": "v6e-16", "topology": "2x4"})
