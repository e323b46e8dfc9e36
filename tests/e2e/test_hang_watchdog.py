"""No TPU-hour wasted on a hang, on the real local cluster: one host's training process is
stopped (SIGSTOP) mid-run, so the other waits forever in its next collective, as a host stuck
in the input pipeline or on a gcsfuse read leaves it. Within the watchdog's bound every host's
stacks are in the job's log and the run's hangs/ directory (the live host's read by itself, the
stopped one's by py-spy from outside), the attempt ends, the job restarts from its last
checkpoint and finishes, and the summary counts one hang, charged to --max_hangs. The same
bound is shorter than the first start's compile: that never fires it."""

from __future__ import annotations

import os
import re
import signal
import time

import psutil
import pytest

from harness.job_control import jobs_client, submit_no_wait, wait_for_step, wait_until_done
from harness.local_ray import launcher_result, run_name
from launcher.core import hangs
from launcher.core.job_events import EventKind, events

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
# Above the heartbeats' FROZEN_AFTER_S (a stopped host is named frozen), below the first
# start's startup and compile on these machines (asserted below), far above a tiny step.
BOUND_S = 20


def stop_a_host() -> tuple[int, float]:
    """SIGSTOPs one of the two Ray Train workers: its every thread halts; returns its pid."""
    workers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "RayTrainWorker" in " ".join(p.info["cmdline"] or [])
    ]
    assert len(workers) == 2, "expected one Ray Train worker per simulated host"
    os.kill(workers[-1].pid, signal.SIGSTOP)
    return workers[-1].pid, time.monotonic()


def test_a_stopped_host_is_caught_its_stacks_kept_and_the_job_resumes(local_cluster):
    client, name = jobs_client(), run_name("hang")
    job_id = f"{name}-job"
    assert BOUND_S > hangs.FROZEN_AFTER_S
    submit_no_wait(
        local_cluster, job_id, f"--hang_timeout_s={BOUND_S}", "tiny-llama.yml",
        f"run_name={name}", "steps=24",
    )  # fmt: skip
    wait_for_step(client, job_id, 8)
    before = client.logs(job_id)
    pid, stopped_at = stop_a_host()
    try:
        while not events(client.logs(job_id)[len(before) :], EventKind.HANG):
            assert time.monotonic() - stopped_at < BOUND_S + 60, "no [hang] line in time"
            time.sleep(1)
        caught_in = time.monotonic() - stopped_at
        assert wait_until_done(client, job_id) == "SUCCEEDED"
    finally:
        if psutil.pid_exists(pid):  # Ray Train ends it with the attempt; never leave it
            os.kill(pid, signal.SIGKILL)
    logs = client.logs(job_id)
    said = [e.fields["what"] for e in events(logs, EventKind.HANG)]
    # The live host reports; the stopped one is named frozen, by its heartbeat.
    (stopped,) = [int(m[1]) for w in said if (m := re.match(rf"host (\d+): .*\(pid {pid} on", w))]
    live = 1 - stopped
    assert re.match(rf"no step, eval or save for \d+s on host {live} \(bound {BOUND_S}s", said[0])
    assert [bool(re.search(r"; frozen: no heartbeat for \d+s", w)) for w in said[1:3]] == [
        rank == stopped for rank in (0, 1)
    ], said
    # Every host's stacks, in the log and the bucket: both were inside the train loop.
    files = list((local_cluster.bucket / name / "hangs").iterdir())
    assert sorted(f.name.split("-host-")[1][0] for f in files) == ["0", "1"], files
    for f in files:
        assert "train_loop_per_worker" in f.read_text(), f.read_text()[-2000:]
        assert f"{f}" in logs
    assert f"stacks of host {stopped} (pid {pid}, read by py-spy from host {live})" in logs
    result = launcher_result(logs)
    assert result["last_step"] == 23
    (restart,) = result["restarts"]
    assert restart["cause"] == "hung" and restart["hang"]["frozen"] == [stopped], restart
    assert "0 preemptions (--max_preemptions), 0 failures (--max_failures), 1 hang " in logs
    # Each start that trained took longer than the bound to its first step (restore, compile),
    # and no hang fired in it: the one hang is the stopped host's. (Ray may start a group that
    # never trains, one placed while the stopped host's node was still going: no first step.)
    trained = [s for s in result["starts"] if s["first_step"] is not None]
    assert len(trained) == 2, result["starts"]
    to_first_step = [start["seconds_to_first_step"] for start in trained]
    assert min(to_first_step) > BOUND_S, result["starts"]
    print(
        f"\nhang: host {stopped} stopped after step {restart['hang']['step']}; [hang] "
        f"{caught_in:.0f}s after the stop (bound {BOUND_S}s); each start's time to its first "
        f"step {to_first_step} s"
    )
