"""A preempted host loses no step, on the real local cluster: `tpu-launcher local preempt` does what
GKE does to a reclaimed TPU host (Ray's drain of its node for preemption with a deadline, which the
chart's preStop hook sends on GKE; the kill at the deadline; the host back), on the tiny corpus with
its data audited (--record_examples). With --max_failures=0, a notice with time to save: every host
saves the step they reach next (JAX's preemption service, MaxText's save), and the restarted group
goes on from it, nothing computed again; the run finishes because a preemption is not a failure.

(A notice with no time to save, back to the last periodic checkpoint with the summary saying
why, was a second preemption here, about 90 s of CI: launcher.core.tpu.preemption's reading of it is
tests/unit/test_preemption.py's, and a host gone with no notice restarts the PyTorch job's and
the elastic test's groups.)"""

from __future__ import annotations

import time

import pytest

from harness.data_audit import audit
from harness.job_control import jobs_client, submit_no_wait, wait_for_step, wait_until_done
from harness.local_ray import launcher_result, run_name, tpu_launcher
from harness.prometheus import restarts_by_cause, settled
from launcher.core.job.events import EventKind, events
from launcher.core.tpu.preemption import PREEMPTED

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
CHECKPOINT_PERIOD = 10
STEPS = 60
# GKE gives a Spot VM 30 s. 15 s was ample for the tiny model's save alone, but in CI, beside
# the preflight tier's compiles on the other core, a step and the save once took longer.
NOTICE_S = 30


def _preempt_host_1(notice: int) -> None:
    done = tpu_launcher("local", "preempt", "--host", "1", "--notice", str(notice), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr


def _wait_for_resume(client, job_id: str, count: int, timeout: float = 300) -> int:
    """The step the `count`-th restart after a preemption resumed at."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = events(client.logs(job_id), EventKind.PREEMPTED)
        if len(seen) >= count:
            return int(seen[count - 1].fields["step"])
        assert client.status(job_id) not in ("FAILED", "STOPPED")
        time.sleep(1)
    raise AssertionError(f"no resume after preemption {count} within {timeout}s")


def test_a_preemption_with_notice_loses_no_step_and_spends_no_failure(local_cluster, tiny_dataset):
    client, name = jobs_client(), run_name("preempt")
    job_id = f"{name}-job"
    submit_no_wait(
        local_cluster,
        job_id,
        "--max_failures=0",
        "--data=tiny",
        "--record_examples",
        "tiny-llama.yml",
        f"run_name={name}",
        f"steps={STEPS}",
        f"checkpoint_period={CHECKPOINT_PERIOD}",
    )
    wait_for_step(client, job_id, 12)
    _preempt_host_1(NOTICE_S)
    _wait_for_resume(client, job_id, 1)
    assert wait_until_done(client, job_id) == "SUCCEEDED"

    logs = client.logs(job_id)
    result = launcher_result(logs)
    assert result["last_step"] == STEPS - 1
    (saved,) = result["restarts"]
    assert saved["cause"] == PREEMPTED and saved["saved_step"] is not None, saved
    assert (saved["resumed_at"], saved["recomputed"]) == (saved["saved_step"] + 1, 0), saved
    assert "restarts:     1 preemption (--max_preemptions), 0 failures" in logs
    assert saved["hosts"] == ["local-slice-0/1"], saved  # the host drained, by its name
    goodput = result["goodput"]
    assert abs(goodput["unaccounted_seconds"]) <= 0.05 * goodput["wall_seconds"], goodput

    # Each example once over the steps (about half the corpus) and two starts: the save on the
    # notice carries Grain's iterator state with the weights.
    seen = audit(local_cluster.bucket / name, steps=STEPS)
    assert seen["starts"] == 2 and seen["examples"] < tiny_dataset.train.examples, seen

    status = tpu_launcher("status", job_id, timeout=120)
    assert f"preempted, resumed at step {saved['resumed_at']}" in status.stdout, status.stdout
    # Where platform teams alert: the restarts counter, by cause, in Prometheus.
    counted = {PREEMPTED: 1.0}
    assert settled(lambda: restarts_by_cause(job_id), counted) == counted
    print(
        "\npreemption: "
        + "; ".join(
            f"notice -> saved {r['saved_step']}, resumed {r['resumed_at']}, "
            f"{r['recomputed']} computed again"
            for r in result["restarts"]
        )
    )
