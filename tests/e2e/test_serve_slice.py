"""Ray Serve LLM's TPU placement on the local cluster: a replica's reservation, made by Ray Serve
LLM's own TPUAccelerator with the bundles the chart's RayService names (one per host;
tests/chart/test_vllm_llm_config.py), takes one whole simulated slice, every host of it on one
ray.io/tpu-slice-name; a replica beyond the cluster's slices is refused while they are held and
lands on the one given back. vLLM itself does not run here (docs/serving.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.local_ray import LocalCluster
from harness.paths import REPO
from launcher.client.local.cluster import TOKEN_AUTH, nodes_file
from launcher.client.local.instance import local_instance
from launcher.core.tpu.slices import LABEL_ACCELERATOR, LABEL_SLICE, LABEL_TOPOLOGY

pytestmark = pytest.mark.e2e


def test_a_replica_reserves_one_whole_slice(local_cluster: LocalCluster, tmp_path):
    started = json.loads(nodes_file().read_text())["nodes"]  # as `up` started them
    hosts = [n["labels"] for n in started if LABEL_SLICE in n["labels"]]
    slices = sorted({h[LABEL_SLICE] for h in hosts})
    accelerator, topology = hosts[0][LABEL_ACCELERATOR], hosts[0][LABEL_TOPOLOGY]
    env = {**os.environ, **local_instance().env, **TOKEN_AUTH}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.serve_slice_driver", accelerator, topology,
         str(len(slices)), str(tmp_path / "found.json")],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads((tmp_path / "found.json").read_text())
    per_slice = len(hosts) // len(slices)
    whole = [[[s, str(w)] for w in range(per_slice)] for s in slices]
    assert sorted(found["placed"]) == whole  # each replica: every host of one slice
    assert found["extra_waited"]  # no slice left: the next replica is not placed
    assert found["extra_placed"] == whole[0]  # until the first gives its slice back
