"""Nothing is lost on failure, on the real local cluster: a killed host (Ray worker process) is
replaced by Ray Train's retry and MaxText resumes from the latest committed checkpoint, loading
its compiled step from the run's compilation cache, and its data where that checkpoint's Grain
iterator state says (each example once, as the job's --record_examples shows). (A stopped job
resuming past a torn save: tests/e2e/test_train_e2e.py, on the session's trained run.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.data_audit import audit
from harness.job_control import (
    RESTORED,
    jobs_client,
    kill_a_host,
    seconds_to_first_step_after_restore,
    submit_no_wait,
    wait_for_step,
    wait_until_done,
)
from harness.local_ray import launcher_result, run_name
from harness.paths import REPO
from launcher.core.job_events import EventKind, events
from launcher.core.run_dir import COMPILE_CACHE_SUBDIR
from launcher.runtime.progress import steps_logged

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
CHECKPOINT_PERIOD = 5  # tiny-llama.yml


def test_a_killed_host_recovers_from_the_latest_checkpoint_and_its_data(
    local_cluster, tiny_dataset
):
    client, name = jobs_client(), run_name("kill")
    job_id = f"{name}-job"
    submit_no_wait(
        local_cluster, job_id, "--data=tiny", "--record_examples", "tiny-llama.yml",
        f"run_name={name}", "steps=30",
    )  # fmt: skip
    wait_for_step(client, job_id, 12)
    before_kill = client.logs(job_id)
    killed_at = kill_a_host()

    recovered_in = seconds_to_first_step_after_restore(client, job_id, len(before_kill), killed_at)
    assert wait_until_done(client, job_id) == "SUCCEEDED"
    logs = client.logs(job_id)
    after = logs[len(before_kill) :]
    last_before = max(steps_logged(before_kill))
    restored = [int(s) for s in RESTORED.findall(after)]
    assert restored, "the restarted worker group did not restore a checkpoint"
    redone = last_before - restored[-1]
    assert 0 <= redone <= CHECKPOINT_PERIOD, (last_before, restored)
    result = launcher_result(logs)
    assert result["last_step"] == 29 and result["first_step"] == restored[-1] + 1
    assert [e.fields["start"] for e in events(logs, EventKind.RESTART)] == ["2"]
    # Goodput counts the restart: the redone steps and the recovery; the parts add up.
    goodput = result["goodput"]
    assert abs(goodput["unaccounted_seconds"]) <= 0.05 * goodput["wall_seconds"], goodput
    # No part below zero: each step's end comes from the step clock, never from a late line.
    assert min(goodput["parts"].values()) >= -0.05 * goodput["wall_seconds"], goodput
    assert goodput["parts"]["restarts"] > 0, goodput
    # The restart loaded the train step JAX compiled the first time, from the run's directory.
    cache = result["compile_cache"]
    assert cache["dir"] == f"{result['run_dir']}/{COMPILE_CACHE_SUBDIR}", cache
    assert any(Path(cache["dir"]).iterdir()), cache
    assert cache["hits_per_start"][0] == 0 and cache["hits_per_start"][-1] >= 1, cache
    assert cache["saved_seconds"] > 0, cache
    # Mid-epoch (30 steps read about a third of the corpus), each example once: the steps
    # computed again after the restore got the same examples, none was read twice.
    seen = audit(local_cluster.bucket / name, steps=30)
    assert seen["starts"] == 2 and seen["hosts"] == 2, seen
    assert seen["examples"] < tiny_dataset.train.examples, seen
    print(
        f"\nrecovery: killed a host at step {last_before}, resumed from checkpoint "
        f"{restored[-1]} ({redone} steps computed again); first step after the restore "
        f"{recovered_in:.0f}s after the kill"
    )


def test_a_job_id_that_does_not_exist_is_named(local_cluster):
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", "status", "no-such-job"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "job: no job 'no-such-job' on the Ray cluster" in proc.stderr
