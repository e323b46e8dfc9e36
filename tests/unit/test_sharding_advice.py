"""Candidate splits follow the slice's physical axes; each keeps the job's other arguments."""

from __future__ import annotations

from itertools import combinations
from math import prod

import pytest

from launcher.core.maxtext_args import MaxTextArgs
from launcher.core.tpu_table import topology_chips
from launcher.preflight.sharding_advice import Estimate, candidate_splits, with_split

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("topology", "chips_per_host"), [("4x4", 4), ("2x2x2", 4), ("4x8", 4), ("2x4", 8), ("8x16", 4)]
)
def test_every_candidate_covers_the_slice_with_whole_physical_axes(topology, chips_per_host):
    dims = [int(d) for d in topology.split("x")]
    splits = candidate_splits(topology, chips_per_host)
    assert splits[0] == {"ici_fsdp_parallelism": topology_chips(topology)}  # fsdp only first
    assert len({tuple(sorted(s.items())) for s in splits}) == len(splits)
    for split in splits:
        assert prod(split.values()) == topology_chips(topology)
        assert split["ici_fsdp_parallelism"] > 1
        assert split.get("ici_tensor_parallelism", 1) <= chips_per_host
        for size in split.values():  # a product of some of the physical axes
            assert any(
                prod(c) == size for r in range(1, len(dims) + 1) for c in combinations(dims, r)
            )


def test_the_tutorial_slice_gets_fsdp_and_fsdp_x_tensor_4():
    splits = candidate_splits("4x4", 4)
    assert {"ici_fsdp_parallelism": 4, "ici_tensor_parallelism": 4} in splits
    assert {"ici_fsdp_parallelism": 16} in splits


def test_with_split_resets_other_axes_and_puts_data_over_dcn():
    args = MaxTextArgs.parse(
        [
            "tiny-llama.yml",
            "run_name=r",
            "ici_tensor_parallelism=4",
            "ici_fsdp_parallelism=4",
            "per_device_batch_size=2",
        ]
    )
    split = with_split(args, {"ici_fsdp_parallelism": 16}, num_slices=2)
    assert int(split.get("ici_fsdp_parallelism")) == 16
    assert int(split.get("ici_tensor_parallelism")) == 1
    assert int(split.get("dcn_data_parallelism")) == 2
    assert int(split.get("per_device_batch_size")) == 2
    assert int(args.get("ici_tensor_parallelism")) == 4  # the job's own args are untouched
    split.check_parallelism(16, 2, "2 x v6e-16")  # a split the launcher itself accepts


def test_estimate_names_its_bound():
    e = Estimate(compute_s=0.2, memory_s=0.5, network_s=0.1)
    assert (e.step_s, e.bound, round(e.mfu, 2)) == (0.5, "HBM", 0.4)
