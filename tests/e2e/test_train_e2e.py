"""End to end on a real local Ray cluster: `ray job submit` -> `python -m launcher.runtime train` ->
JaxTrainer -> MaxText on every simulated TPU host (a v5p-16 slice: 2 hosts x 4 CPU devices), with
real jax.distributed, real Orbax checkpoints, a stopped job resumed from them past a torn save."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest

from harness.job_control import jobs_client, submit_no_wait, wait_for_step, wait_until_done
from harness.local_ray import (
    full_log,
    launcher_result,
    local_cluster_command,
    run_name,
    tpu_launcher,
)
from harness.prometheus import settled
from launcher.client.local.instance import local_instance
from launcher.core.job.checkpoints import committed_steps
from launcher.core.job.run_dir import COMPILE_CACHE_SUBDIR
from launcher.core.runtime_door import RUNTIME_MODULE
from launcher.core.tpu.device_metrics import STRAGGLER
from tests.e2e.conftest import PRICE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


# An untrained model's held-out loss on UTF-8 bytes is near ln(256) = 5.55 nats (5.87 measured:
# MaxText's initialization is not uniform); weights that learned nothing cannot reach 1 nat
# below their own first eval, which 10 steps on the tiny corpus do (2.8 nats measured).
EVAL_MARGIN = 1.0


def test_trains_on_the_corpus_checkpoints_evaluates_and_resumes(
    local_cluster, trained_run, tiny_dataset
):
    name, code, out = trained_run.name, trained_run.code, trained_run.output
    assert code == 0, out[-6000:]
    assert "v5p-16 (TPU v5p 2x2x2: 2 hosts x 4 chips): 2 workers x 4 devices" in out
    first = launcher_result(out)
    assert (first["first_step"], first["last_step"]) == (0, 9)
    assert math.isfinite(first["final_loss"]) and first["final_loss"] < first["first_loss"]
    # The plan names the data and its epochs, from the manifest: 10 steps x 8 sequences x 128
    # tokens over the training split's tokens.
    assert f"train {tiny_dataset.train.examples} examples" in out
    epochs = 10 * 8 * 128 / tiny_dataset.train.tokens
    assert f"80 sequences x 128 tokens packed: up to {epochs:.3f} epochs" in out
    # Held-out loss after steps 0, 3, 6 and 9: on the terminal, in the summary and the record.
    evals = first["evals"]
    assert [step for step, _ in evals] == [0, 3, 6, 9], evals
    assert evals[-1][1] < evals[0][1] - EVAL_MARGIN, evals
    assert "[eval] after step 9: eval loss" in out and "eval loss:    " in out
    # tiny-llama.yml checkpoints every 5 steps; MaxText also saves the last step.
    assert first["checkpoints"] == [0, 5, 9]
    assert "[progress] step 10/10 loss" in out
    # A quiet terminal: the plan, progress, saves and the summary; the rest in the log file.
    assert len(out.splitlines()) <= 60, out
    assert "Config param" not in out and "completed step: 9," in full_log(out)
    assert "goodput:" in out and "loss curve:" in out
    assert Path(first["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # `logs` later, into a pipe: what submit showed, no colour codes; --raw: every line.
    job_id = re.search(r"submitted job (\S+) to", out)[1]
    tidy = local_cluster.launcher("logs", job_id)
    assert tidy.returncode == 0 and "\x1b[" not in tidy.stdout, tidy.stdout[-2000:] + tidy.stderr
    assert "[checkpoint] saved step 9" in tidy.stdout
    assert "== training finished ==" in tidy.stdout and "full log: " in tidy.stdout
    assert "Config param" not in tidy.stdout
    raw = local_cluster.launcher("logs", "--raw", job_id)
    assert raw.returncode == 0 and "\x1b[" not in raw.stdout and "Config param" in raw.stdout
    waited = local_cluster.launcher("status", "--wait", job_id)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert f"job {job_id}: SUCCEEDED" in waited.stdout
    status = json.loads(local_cluster.launcher("status", "--json", job_id).stdout)
    assert (status["state"], status["run"], status["step"]) == ("SUCCEEDED", name, 10)
    assert status["goodput"] == first["goodput"]  # the result line's record, as a script reads
    # What its chips cost at the stated price: the session's v5p-16 (8 chips) for its wall time.
    cost = status["cost"]
    assert cost == first["cost"] and cost["usd_per_chip_hour"] == PRICE and cost["chips"] == 8
    wall = first["goodput"]["wall_seconds"]
    assert cost["usd"] == pytest.approx(8 * wall / 3600 * PRICE, rel=1e-3)
    assert cost["usd_per_useful_step"] == pytest.approx(cost["usd"] / 10, rel=1e-3)
    assert cost["usd_not_productive"] == pytest.approx(
        cost["usd"] * (1 - first["goodput"]["goodput"]), rel=1e-3
    )
    assert cost["usd_per_million_tokens"] > 0
    assert f"cost:         ${cost['usd']:.2f} for" in out
    listed = local_cluster.launcher("list", "--json")
    assert listed.returncode == 0, listed.stderr
    (job,) = [j for j in json.loads(listed.stdout) if j["job_id"] == job_id]
    assert (job["state"], job["run"], job["step"], job["total_steps"]) == (
        "SUCCEEDED", name, 10, 10,
    )  # fmt: skip
    # One record of the job, whoever answers: Ray (`list`, `status`) and the run's history. Ray
    # times the job from its supervisor, the history from the driver; Ray's message is Ray's.
    assert job == status
    bucket = str(local_cluster.bucket)
    recorded = json.loads(
        local_cluster.launcher("status", "--json", "--data-dir", bucket, job_id).stdout
    )
    assert recorded.pop("source") == str(trained_run.dir / "jobs" / job_id)
    timed = {"started_at", "duration_seconds", "message"}
    assert {k: v for k, v in recorded.items() if k not in timed} == {
        k: v for k, v in job.items() if k not in timed
    }
    assert abs(recorded["started_at"] - job["started_at"]) < 60, (recorded, job)
    goodput = first["goodput"]
    assert abs(goodput["unaccounted_seconds"]) <= 0.05 * goodput["wall_seconds"], goodput
    # No part below zero: each step's end comes from the step clock, never from a late line.
    assert min(goodput["parts"].values()) >= -0.05 * goodput["wall_seconds"], goodput
    assert goodput["parts"]["productive"] > 0 and goodput["parts"]["compile"] > 0
    # Start-up from the job's own clock: workers up, Orbax's restore and JAX's compiles (their
    # own measures) and the rest add up to the time to the first step, none below zero.
    (timeline,) = [start["timeline"] for start in first["starts"]]
    parts = [timeline[k] for k in ("workers", "restore", "compile", "other")]
    assert sum(parts) == pytest.approx(timeline["total"], abs=0.05) and min(parts) >= 0, timeline
    assert timeline["workers"] > 0 and timeline["compile"] > 0 and timeline["restore"] == 0
    assert "start-up:\n  start 1: " in out

    # Resumed, stopped mid-run, submitted again: the stopped job resumes from its latest
    # committed checkpoint, past a save torn by a kill mid-write (one job start fewer than
    # resuming and stopping apart: the suite shares runs).
    client, job_id = jobs_client(), f"{name}-more"
    submit_no_wait(
        local_cluster, job_id, "--data=tiny", "tiny-llama.yml", f"run_name={name}", "steps=400",
        "num_epoch=2",
    )  # fmt: skip
    wait_for_step(client, job_id, 12)
    # One host's chips go idle while the job runs (the local TPU device plugin stand-in holds
    # them at 0; Ray's own agent scrapes it): the driver names that host the straggler.
    local_cluster_command("local", "idle-chips", "--host", "1")
    try:
        verdict = settled(lambda: _devices(job_id).get("verdict"), STRAGGLER, wait_s=120)
        devices = _devices(job_id)
        # Read while the chips are still idle: once they work again, the next verdict is ok.
        shown = tpu_launcher("status", job_id).stdout
    finally:
        local_cluster_command("local", "idle-chips", "--host", "1", "--off")
    assert verdict == STRAGGLER and devices["hosts"] == ["local-slice-0/1"], devices
    assert "[devices] straggler: local-slice-0/1 (" in shown and "local-slice-0/1 0%" in shown
    stop = tpu_launcher("stop", job_id)
    assert stop.returncode == 0, stop.stderr
    assert wait_until_done(client, job_id) == "STOPPED"
    status = tpu_launcher("status", job_id)
    assert "STOPPED" in status.stdout + status.stderr
    latest = committed_steps(trained_run.dir)[-1]
    assert latest >= 10
    # What a process killed mid-save leaves: Orbax's temporary directory, never committed, at a
    # later step than the latest commit. Neither MaxText nor the launcher may take it.
    torn = trained_run.dir / "checkpoints" / f"{latest + 3}.orbax-checkpoint-tmp"
    shutil.copytree(trained_run.dir / "checkpoints" / str(latest), torn)
    os.remove(torn / "commit_success.txt")

    code, out = local_cluster.submit(
        "--steps_beyond_checkpoint=5", "--data=tiny", "tiny-llama.yml", f"run_name={name}"
    )
    assert code == 0, out[-6000:]
    second = launcher_result(out)
    assert second["first_step"] == latest + 1, "did not resume from the latest committed step"
    assert second["starts"][0]["timeline"]["restore"] > 0, second["starts"]  # Orbax's measure
    assert second["last_step"] == latest + 5
    assert latest + 3 not in second["checkpoints"] and latest + 5 in second["checkpoints"]
    assert {0, 5, 9, 10} <= set(second["checkpoints"])
    assert second["final_loss"] < first["first_loss"]
    # The resumed run loaded from the output directory's compilation cache what compiles the
    # same (its train step compiles again: steps= is part of its learning-rate schedule).
    assert (
        second["compile_cache"]["dir"] == f"{Path(second['run_dir']).parent}/{COMPILE_CACHE_SUBDIR}"
    )
    assert second["compile_cache"]["hits"] >= 1
    assert "compile cache:" in out and "loaded from it" in out


def _devices(job_id: str) -> dict:
    """The job's chips' last verdict, as `status --json` gives it ({}: none yet)."""
    return json.loads(tpu_launcher("status", "--json", job_id).stdout)["devices"] or {}


def test_a_failing_job_exits_nonzero_with_the_launchers_message(local_cluster):
    # The cluster is a v5p-16 (8 devices); 4 x 4 = 16 cannot fit. The launcher on the head sees
    # the cluster's slice and refuses before any worker starts.
    code, out = local_cluster.submit(
        "tiny-llama.yml",
        f"run_name={run_name('bad')}",
        "ici_fsdp_parallelism=4",
        "ici_tensor_parallelism=4",
    )
    assert code == 2, out[-4000:]  # refused by the head before any host started: as here
    assert "does not match the 8 devices per slice (v5p-16" in out
    assert "FAILED" in out
    # What a script waits on: the job's end, as an exit code.
    job_id = re.search(r"submitted job (\S+) to", out)[1]
    waited = local_cluster.launcher("status", "--wait", job_id)
    assert waited.returncode == 1, waited.stdout + waited.stderr
    assert f"job {job_id}: FAILED" in waited.stdout


def test_helm_tests_check_passes_on_a_live_head_and_names_what_is_missing(local_cluster):
    """What `helm test` runs in its pod (`python -m launcher.runtime cluster-check`), against a
    live Ray head with token auth: the local cluster's head and its 2 simulated hosts."""
    check = ["cluster-check", "--address", local_instance().dashboard_address]
    ok = tpu_launcher(*check, "--expect-nodes", "3", "--timeout", "60", module=RUNTIME_MODULE)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "3 nodes alive" in ok.stdout
    short = tpu_launcher(*check, "--expect-nodes", "9", "--timeout", "4", module=RUNTIME_MODULE)
    assert short.returncode == 1
    assert "3 of 9 nodes alive" in short.stderr
