"""Ironwood on the local cluster: `tpu-launcher up --tpu tpu7x-16` starts 2 simulated hosts that
look to Ray like tpu7x hosts (4 chips each, TPU-V7X, pod type v7x-16 with its head resource), each
JAX process seeing 8 CPU devices (a tpu7x chip is two devices); the tiny model trains and
checkpoints on the 16 devices through the same path as v5p-16 (whose resume the train test
checks: the restore does not depend on the generation).

The cluster is restarted with that slice for this module (after the tests on the session's
v5p-16, before the elastic test's two slices); one started by `tpu-launcher up` gets its slice
back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.local_ray import LocalCluster, full_log, launcher_result, reshaped, run_name

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def ironwood(local_cluster: LocalCluster) -> Iterator[LocalCluster]:
    with reshaped(local_cluster, "--tpu", "tpu7x-16") as cluster:
        yield cluster


def test_a_tpu7x_16_trains_and_checkpoints_on_16_devices(ironwood):
    name = run_name("ironwood")
    code, out = ironwood.submit("tiny-llama.yml", f"run_name={name}", "steps=6")
    assert code == 0, out[-6000:]
    # The launcher on the head read the slice from Ray's nodes: chips and devices apart.
    assert "tpu7x-16 (TPU tpu7x 2x2x2: 2 hosts x 4 chips): 2 workers x 8 devices = 16" in out
    # MaxText's own count of the JAX devices it trains on.
    assert "Config param num_target_devices: 16" in full_log(out)
    first = launcher_result(out)
    assert (first["first_step"], first["last_step"]) == (0, 5)
    assert first["checkpoints"] == [0, 5]
    assert first["final_loss"] < first["first_loss"]
