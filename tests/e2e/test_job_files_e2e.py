"""A job submitted from a directory outside the checkout, with a MaxText config of its own:
the config travels with the job (Ray's working_dir) and the cluster trains from that copy, even
after the local file is gone; `tpu-launcher list` then shows the job with its run and step. The
job runs on a CPU-only slice (2 hosts x 2 devices: plain Ray workers, jax.distributed on CPU),
the path of clusters without TPUs, so one job start covers both."""

from __future__ import annotations

import functools
import os
import re

import pytest

from harness.job_control import jobs_client, wait_until_done
from harness.local_ray import run_name, tpu_launcher
from harness.paths import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def test_a_config_of_your_own_travels_with_the_job(local_cluster, tmp_path):
    work = tmp_path / "my-project"  # nothing of the checkout here
    work.mkdir()
    tiny = (REPO / "launcher" / "configs" / "tiny-llama.yml").read_text()
    # Its own sizes (not the packaged tiny-llama's), so a run of the packaged one would differ.
    (work / "my-model.yml").write_text(tiny.replace("base_mlp_dim: 128", "base_mlp_dim: 96"))
    name = run_name("shipped")
    job = [
        "--cpu_hosts=2",
        "--cpu_devices_per_host=2",
        "my-model.yml",
        f"run_name={name}",
        "steps=3",
    ]
    if not local_cluster.started_here:
        job.append(f"base_output_directory={local_cluster.bucket}")
    env = {**os.environ, "LAUNCHER_STATE_DIR": str(tmp_path / "state")}

    launcher = functools.partial(tpu_launcher, cwd=work, env=env, timeout=300)

    submit = launcher("submit", "--no-wait", "--", *job)
    assert submit.returncode == 0, submit.stdout + submit.stderr
    assert "ships with the job (its working directory on every host): 1 file" in submit.stdout
    assert "  my-model.yml (" in submit.stdout
    (work / "my-model.yml").unlink()  # the cluster has its own copy now
    job_id = next(
        line.split()[2] for line in submit.stdout.splitlines() if line.startswith("submitted job")
    )
    client = jobs_client()
    status = wait_until_done(client, job_id, timeout=420)
    logs = client.logs(job_id)
    assert status == "SUCCEEDED", logs[-4000:]
    # MaxText read the shipped copy: Ray's unpacked working directory, with its own sizes.
    assert re.search(
        r"launcher: maxtext \S+/runtime_resources/working_dir_files/\S+/my-model.yml", logs
    )
    assert "Config param base_mlp_dim: 96" in logs
    assert "CPU slice: 2 hosts x 2 devices: 2 workers x 2 devices = 4 devices" in logs

    listed = launcher("list")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows[0] == ["JOB", "STATE", "RUN", "STEP", "STARTED", "DURATION"]
    ours = next(r for r in rows if r[0] == job_id)
    assert ours[1:4] == ["SUCCEEDED", name, "3/3"]
