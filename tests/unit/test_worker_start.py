"""What each start of the worker group tells MaxText, read on the worker: the sizing for the
slices it got replaces the same keys of the job's argv, and on one slice no MEGASCALE_* is left
from a larger group (libtpu would wait for slices that are gone)."""

from __future__ import annotations

import pytest

from launcher.runtime.job.host import drop_stale_megascale, slices_of_this_start
from launcher.runtime.train.worker import argv_for_this_host

pytestmark = pytest.mark.unit


def test_the_sizing_replaces_the_keys_it_sets_and_keeps_the_rest(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    argv = ["train", "c.yml", "run_name=r", "gradient_accumulation_steps=3", "steps=9"]
    got = argv_for_this_host(argv, {"gradient_accumulation_steps": "6"})
    assert got == ["train", "c.yml", "run_name=r", "steps=9", "gradient_accumulation_steps=6"]


def test_cpu_devices_add_maxtexts_cpu_mode_and_in_process_grain_unless_the_user_chose(
    monkeypatch,
):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    got = argv_for_this_host(["train", "c.yml"])
    assert got[2:] == ["hardware=cpu", "grain_worker_count=0", "grain_worker_count_eval=0"]
    chosen = argv_for_this_host(["train", "c.yml", "hardware=gpu", "grain_worker_count=2"])
    assert chosen.count("hardware=gpu") == 1 and "grain_worker_count=0" not in chosen


def test_the_slices_a_start_got_come_from_its_world_size():
    assert slices_of_this_start(4, hosts_per_slice=2) == 2
    assert slices_of_this_start(2, hosts_per_slice=2) == 1
    assert slices_of_this_start(3, hosts_per_slice=0) == 1  # no hosts per slice: one slice


def test_one_slice_drops_a_stale_slice_count_and_more_keep_rays(monkeypatch):
    monkeypatch.setenv("MEGASCALE_NUM_SLICES", "2")  # declared by a two-slice pod
    monkeypatch.setenv("MEGASCALE_SLICE_ID", "1")
    assert drop_stale_megascale(2) == {"MEGASCALE_NUM_SLICES": "2", "MEGASCALE_SLICE_ID": "1"}
    assert drop_stale_megascale(1) == {}
