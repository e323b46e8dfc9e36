"""torchrun's per-host variables on the local slice (launcher.runtime.torch.hosts): each
simulated host's workers read what a TPU host's do, whatever order Ray gave their ranks."""

from __future__ import annotations

import pytest

from launcher.runtime.torch.hosts import interleaved, per_host_env, this_host

pytestmark = pytest.mark.unit

A0, A1, B0 = ("slice-0", 0), ("slice-0", 1), ("slice-1", 0)


def test_each_hosts_workers_count_from_zero_and_the_hosts_are_numbered_by_slice_then_worker():
    # Ray's order on the local slice: the two hosts' workers alternate.
    hosts = [A1, A0, A1, A0, B0, B0]
    views = [per_host_env(hosts, r) for r in range(len(hosts))]
    assert [v["LOCAL_RANK"] for v in views] == ["0", "0", "1", "1", "0", "1"]
    assert [v["NODE_RANK"] for v in views] == ["1", "0", "1", "0", "2", "2"]
    assert all(v["GROUP_RANK"] == v["NODE_RANK"] for v in views)
    assert {v["LOCAL_WORLD_SIZE"] for v in views} == {"2"}
    assert interleaved(hosts)
    assert not interleaved([A0, A0, A1, A1, B0, B0])


def test_a_host_is_its_slice_and_worker_id_as_the_slice_gives_them():
    assert this_host({"TPU_NAME": "local-slice-0", "TPU_WORKER_ID": "1"}) == ("local-slice-0", 1)
    assert this_host({}) == ("", 0)
