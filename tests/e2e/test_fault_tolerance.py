"""Nothing is lost on failure, on the real local cluster: a killed host (Ray worker process) is
replaced by Ray Train's retry and MaxText resumes from the latest committed checkpoint; a stopped
job resumes when submitted again; an unfinished (uncommitted) checkpoint is never resumed from."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from launcher.core.checkpoints import committed_steps
from tests.support.local_ray import launcher_result, run_name
from tests.support.paths import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
STEP = re.compile(r"completed step: (\d+),")
RESTORED = re.compile(r"restoring from this run's directory step (\d+)")
CHECKPOINT_PERIOD = 5  # tiny-llama.yml


def _client():
    from pathlib import Path

    from ray.job_submission import JobSubmissionClient

    token = (Path.home() / ".ray" / "auth_token").read_text().strip()  # the local cluster's
    return JobSubmissionClient(
        "http://127.0.0.1:8265", headers={"Authorization": f"Bearer {token}"}
    )


def _submit_no_wait(cluster, job_id: str, *job_args: str) -> None:
    code, out = cluster.submit(*job_args, extra=("--no-wait", "--submission-id", job_id))
    assert code == 0, out


def _wait_for_step(client, job_id: str, step: int, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = client.get_job_logs(job_id)
        steps = [int(s) for s in STEP.findall(logs)]
        if steps and max(steps) >= step:
            return logs
        assert client.get_job_status(job_id).value not in ("FAILED", "STOPPED"), logs[-3000:]
        time.sleep(1)
    raise AssertionError(f"job {job_id} did not reach step {step} in {timeout}s")


def _wait_until_done(client, job_id: str, timeout: float = 600) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = str(client.get_job_status(job_id).value)
        if status in ("SUCCEEDED", "FAILED", "STOPPED"):
            return status
        time.sleep(2)
    raise AssertionError(f"job {job_id} still running after {timeout}s")


def _seconds_to_first_step_after_restore(
    client, job_id: str, offset: int, since: float, timeout: float = 400
) -> float:
    while time.monotonic() - since < timeout:
        after = client.get_job_logs(job_id)[offset:]
        restore = RESTORED.search(after)
        if restore and STEP.search(after, restore.end()):
            return time.monotonic() - since
        time.sleep(0.5)
    raise AssertionError(f"no step after a restore within {timeout}s of the kill")


def test_a_killed_host_recovers_from_the_latest_checkpoint(local_cluster):
    client, name = _client(), run_name("kill")
    job_id = f"{name}-job"
    _submit_no_wait(local_cluster, job_id, "tiny-llama.yml", f"run_name={name}", "steps=30")
    _wait_for_step(client, job_id, 12)
    workers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "RayTrainWorker" in " ".join(p.info["cmdline"] or [])
    ]
    assert len(workers) == 2, "expected one Ray Train worker per simulated host"
    before_kill = client.get_job_logs(job_id)
    killed_at = time.monotonic()
    os.kill(workers[-1].pid, signal.SIGKILL)  # a host dies mid-training

    recovered_in = _seconds_to_first_step_after_restore(client, job_id, len(before_kill), killed_at)
    assert _wait_until_done(client, job_id) == "SUCCEEDED"
    logs = client.get_job_logs(job_id)
    after = logs[len(before_kill) :]
    last_before = max(int(s) for s in STEP.findall(before_kill))
    restored = [int(s) for s in RESTORED.findall(after)]
    assert restored, "the restarted worker group did not restore a checkpoint"
    redone = last_before - restored[-1]
    assert 0 <= redone <= CHECKPOINT_PERIOD, (last_before, restored)
    result = launcher_result(logs)
    assert result["last_step"] == 29 and result["first_step"] == restored[-1] + 1
    assert "[restart] the worker group started again (start 2)" in logs
    # Goodput counts the restart: the redone steps and the recovery; the parts add up.
    goodput = result["goodput"]
    assert abs(goodput["unaccounted_seconds"]) <= 0.05 * goodput["wall_seconds"], goodput
    # No part below zero beyond the estimate of the first step's end (its save: seconds).
    assert min(goodput["parts"].values()) >= -0.05 * goodput["wall_seconds"], goodput
    assert goodput["parts"]["restarts"] > 0, goodput
    print(
        f"\nrecovery: killed a host at step {last_before}, resumed from checkpoint "
        f"{restored[-1]} ({redone} steps computed again); first step after the restore "
        f"{recovered_in:.0f}s after the kill"
    )


def test_a_stopped_job_resumes_when_submitted_again(local_cluster):
    client, name = _client(), run_name("stop")
    job_id = f"{name}-job"
    _submit_no_wait(local_cluster, job_id, "tiny-llama.yml", f"run_name={name}", "steps=400")
    _wait_for_step(client, job_id, 12)
    stop = subprocess.run(
        [sys.executable, "-m", "launcher", "stop", job_id], cwd=REPO, capture_output=True, text=True
    )
    assert stop.returncode == 0, stop.stderr
    assert _wait_until_done(client, job_id) == "STOPPED"
    status = subprocess.run(
        [sys.executable, "-m", "launcher", "status", job_id],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert "STOPPED" in status.stdout + status.stderr

    latest = committed_steps(local_cluster.bucket / name)[-1]
    assert latest >= 10
    code, out = local_cluster.submit(
        "--steps_beyond_checkpoint=5", "tiny-llama.yml", f"run_name={name}"
    )
    assert code == 0, out[-4000:]
    result = launcher_result(out)
    assert result["first_step"] == latest + 1, "the resubmission did not resume"
    assert result["last_step"] == latest + 5


def test_an_unfinished_checkpoint_is_never_resumed_from(local_cluster):
    name = run_name("torn")
    code, out = local_cluster.submit("tiny-llama.yml", f"run_name={name}", "steps=6")
    assert code == 0, out[-4000:]
    run_dir = launcher_result(out)["run_dir"]
    assert launcher_result(out)["checkpoints"] == [0, 5]
    # What a process killed mid-save leaves: Orbax's temporary directory, never committed.
    torn = f"{run_dir}/checkpoints/8.orbax-checkpoint-tmp"
    shutil.copytree(f"{run_dir}/checkpoints/5", torn)
    os.remove(f"{torn}/commit_success.txt")

    code, out = local_cluster.submit("tiny-llama.yml", f"run_name={name}", "steps=10")
    assert code == 0, out[-4000:]
    result = launcher_result(out)
    assert result["first_step"] == 6, "resumed from the unfinished checkpoint"
    assert result["checkpoints"] == [0, 5, 9]


def test_a_job_id_that_does_not_exist_is_named(local_cluster):
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", "status", "no-such-job"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "JOB: no job 'no-such-job' on the Ray cluster" in proc.stderr
