"""End to end on a real local Ray cluster: `ray job submit` -> `tpu-launcher train` -> JaxTrainer ->
MaxText on every simulated TPU host (a v5p-16 slice: 2 hosts x 4 CPU devices), with real
jax.distributed, real Orbax checkpoints and a resume from them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.local_ray import full_log, launcher_result, local_cluster_command, run_name

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_trains_checkpoints_and_resumes(local_cluster, trained_run):
    name, code, out = trained_run.name, trained_run.code, trained_run.output
    assert code == 0, out[-6000:]
    assert "v5p-16 (TPU v5p 2x2x2: 2 hosts x 4 chips): 2 workers x 4 devices" in out
    first = launcher_result(out)
    assert (first["first_step"], first["last_step"]) == (0, 9)
    assert math.isfinite(first["final_loss"]) and first["final_loss"] < first["first_loss"]
    # tiny-llama.yml checkpoints every 5 steps; MaxText also saves the last step.
    assert first["checkpoints"] == [0, 5, 9]
    assert "[progress] step 10/10 loss" in out
    # A quiet terminal: the plan, progress, saves and the summary; the rest in the log file.
    assert len(out.splitlines()) <= 60, out
    assert "Config param" not in out and "completed step: 9," in full_log(out)
    assert "goodput:" in out and "loss curve:" in out
    assert Path(first["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    goodput = first["goodput"]
    assert abs(goodput["unaccounted_seconds"]) <= 0.05 * goodput["wall_seconds"], goodput
    # No part below zero beyond the estimate of the first step's end (its save: seconds).
    assert min(goodput["parts"].values()) >= -0.05 * goodput["wall_seconds"], goodput
    assert goodput["parts"]["productive"] > 0 and goodput["parts"]["compile"] > 0

    code, out = local_cluster.submit("tiny-llama.yml", f"run_name={name}", "steps=15")
    assert code == 0, out[-6000:]
    second = launcher_result(out)
    assert second["first_step"] == 10, "the second submission did not resume from step 9"
    assert second["last_step"] == 14
    assert second["checkpoints"] == [0, 5, 9, 10, 14]
    assert second["final_loss"] < first["first_loss"]
    # The resumed run loaded from the run's compilation cache what compiles the same (its train
    # step compiles again: steps= is part of its learning-rate schedule).
    assert first["compile_cache"]["hits"] == 0 and second["compile_cache"]["hits"] >= 1
    assert "compile cache:" in out and "loaded from it" in out


def test_cpu_slice_of_two_hosts_by_two_devices(local_cluster):
    """The CPU-only path (clusters without TPUs): plain workers, jax.distributed on CPU."""
    name = run_name("cpu")
    code, out = local_cluster.submit(
        "--cpu_hosts=2",
        "--cpu_devices_per_host=2",
        "tiny-llama.yml",
        f"run_name={name}",
        "steps=4",
        extra=("--verbose",),
    )
    assert code == 0, out[-6000:]
    assert "Config param" in out and "LAUNCHER_RESULT" in out  # --verbose (VERBOSE=1): all
    assert "CPU slice: 2 hosts x 2 devices: 2 workers x 2 devices = 4 devices" in out
    result = launcher_result(out)
    assert (result["first_step"], result["last_step"]) == (0, 3)


def test_a_failing_job_exits_nonzero_with_the_launchers_message(local_cluster):
    # The cluster is a v5p-16 (8 devices); 4 x 4 = 16 cannot fit. The launcher on the head sees
    # the cluster's slice and refuses before any worker starts.
    code, out = local_cluster.submit(
        "tiny-llama.yml",
        f"run_name={run_name('bad')}",
        "ici_fsdp_parallelism=4",
        "ici_tensor_parallelism=4",
    )
    assert code == 1, out[-4000:]
    assert "does not match the 8 devices per slice (v5p-16" in out
    assert "FAILED" in out


def test_helm_tests_check_passes_on_a_live_head_and_names_what_is_missing(local_cluster):
    """What `helm test` runs in its pod (`tpu-launcher cluster-check`), against a live Ray head
    with token auth: the local cluster's head and its 2 simulated hosts."""
    check = ["cluster-check", "--address", "http://127.0.0.1:8265"]
    ok = local_cluster_command(*check, "--expect-nodes", "3", "--timeout", "60", check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "3 nodes alive" in ok.stdout
    short = local_cluster_command(*check, "--expect-nodes", "9", "--timeout", "4", check=False)
    assert short.returncode == 1
    assert "3 of 9 nodes alive" in short.stderr
