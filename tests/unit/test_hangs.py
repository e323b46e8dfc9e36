"""The hang watchdog's decisions, on its own clock: never armed before a start's first step
(a slow first compile or restore never counts), the bound from the measured step time, frozen
hosts told from live ones by their heartbeats, the stacks of this process and of a stopped one
(py-spy, as the watchdog runs it), the restart named a hang in the summary, and Ray Train's
failure policy charging it to --max_hangs. Ray's KV store is a dict here (the job's records
under their keys); the e2e test (tests/e2e/test_fault_tolerance.py) runs all of it on the
local cluster with a host stopped by SIGSTOP."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import pytest

from launcher.core.job import hangs
from launcher.core.job.events import EventKind, events
from launcher.core.job.goodput import Attempt, StepPoint
from launcher.core.job.hangs import HangBound, Heartbeat, overdue, reporter
from launcher.core.tpu.preemption import FAILED, HUNG, PREEMPTED, restarts
from launcher.runtime.train.progress import StepRecord

pytestmark = pytest.mark.unit


def test_the_bound_is_the_floor_or_the_step_factor_whichever_is_longer():
    bound = HangBound(floor_s=60, step_factor=10)
    assert bound.seconds([1.0, 2.0, 1.5]) == 60
    assert bound.seconds([9.0, 8.0, 30.0]) == 90  # the median, not one slow step
    # Only the recent steps: a model that got faster is held to its new pace.
    assert bound.seconds([100.0] * 20 + [1.0] * hangs.RECENT_STEPS) == 60
    assert "--hang_timeout_s=60" in bound.describe([1.0]) and "median step time 1.00s" in (
        bound.describe([1.0])
    )


def test_no_step_yet_is_never_a_hang_however_long_the_compile():
    bound = HangBound(floor_s=10, step_factor=10)
    assert overdue(bound, [], None, now=1e9) is None
    assert overdue(bound, [1.0], 100.0, now=105.0) is None
    assert overdue(bound, [1.0], 100.0, now=111.0) == pytest.approx(11.0)
    assert overdue(HangBound(0, 10), [1.0], 100.0, now=1e9) is None  # --hang_timeout_s=0: off


def _beat(rank: int, beat_at: float, step: int = 11) -> Heartbeat:
    return Heartbeat(rank, 100 + rank, f"node{rank}", f"10.0.0.{rank}", step, beat_at - 1, beat_at)


def test_a_host_without_a_recent_heartbeat_is_frozen_and_the_lowest_live_one_reports():
    now = 1000.0
    beats = [_beat(0, now - hangs.FROZEN_AFTER_S - 5), _beat(1, now - 1), _beat(2, now - 2)]
    assert [b.frozen(now) for b in beats] == [True, False, False]
    assert reporter(beats, now) == 1
    assert "frozen: no heartbeat for 20s (pid 100 on 10.0.0.0)" in beats[0].describe(now)
    assert "host 1: step 11, 2s ago; alive, waiting" in beats[1].describe(now)


def _attempt(start: float, steps: range) -> Attempt:
    return Attempt(
        started_at=start,
        steps=[StepPoint(s, 1.0, start + 10 + n, 1.0, 100.0) for n, s in enumerate(steps)],
        checkpoints=[(s, start + 10 + n) for n, s in enumerate(steps) if s % 5 == 0],
    )


def test_a_restart_after_a_hang_record_is_a_hang_not_a_failure():
    first, second = _attempt(0, range(0, 12)), _attempt(100, range(10, 30))
    hang = {"at": 60.0, "rank": 0, "step": 11, "gap": 31.0, "bound": 30.0, "frozen": [1]}
    (r,) = restarts([first, second], [], hang_records=[hang])
    assert (r.cause, r.resumed_at, r.recomputed) == (HUNG, 10, 2)
    assert r.describe() == (
        "start 2: a hang (no step for 31s after step 11; host 1 frozen); resumed at step 10 "
        "from the last checkpoint, 2 steps computed again"
    )
    # A hang record from another window names nothing; a notice in the window wins.
    (late,) = restarts([first, second], [], (), [{**hang, "at": 150.0}])
    assert late.cause == FAILED
    notice = {"at": 50.0, "deadline": 80.0}
    assert restarts([first, second], [notice], (), [hang])[0].cause == PREEMPTED
    # A host drained for preemption after the window does not explain this one; in it, the
    # hang record does.
    assert restarts([first, second], [], [150.0], [hang])[0].cause == HUNG
    assert restarts([first, second], [], [70.0], [hang])[0].cause == HUNG


@dataclass
class Tracker:
    """What the watchdog reads of launcher.runtime.train.progress.ProgressTracker."""

    steps: list[StepRecord] = field(default_factory=list)
    progress_at: float | None = None

    def step(self, n: int, at: float, seconds: float = 1.0) -> None:
        self.steps.append(StepRecord(n, seconds, 0.0, 100.0, 3.0, 512))
        self.progress_at = at


@pytest.fixture
def kv(monkeypatch):
    """Ray's KV store as a dict, where launcher.runtime.job.kv reads and writes it."""
    from launcher.runtime.job import kv as job_kv

    store: dict[str, object] = {}
    monkeypatch.setattr(job_kv, "put", store.__setitem__)
    monkeypatch.setattr(job_kv, "get", store.get)
    monkeypatch.setattr(
        job_kv, "records", lambda p: {k: v for k, v in sorted(store.items()) if k.startswith(p)}
    )
    return store


def _watchdog(tmp_path, kv, clock, rank=0):
    from launcher.runtime.train.hang_watchdog import HangWatchdog

    said: list[str] = []
    ended: list[int] = []
    tracker = Tracker()
    dog = HangWatchdog(
        HangBound(30, 10), tracker, "summary/run/1", rank, f"node{rank}", f"10.0.0.{rank}",
        tmp_path, said.append, ended.append, clock=lambda: clock[0],
    )  # fmt: skip
    return dog, tracker, said, ended


def test_the_watchdog_waits_out_any_compile_then_fires_once_past_the_bound(tmp_path, kv):
    clock = [1000.0]
    dog, tracker, said, ended = _watchdog(tmp_path, kv, clock)
    clock[0] += 3600  # an hour of compiling: no step, no hang
    dog.check()
    assert not ended and kv["summary/run/1/heartbeats/0"]["step"] is None
    tracker.step(0, clock[0])
    clock[0] += 29
    dog.check()
    assert not ended
    clock[0] += 2
    dog.check()
    dog.check()  # once
    assert ended == [hangs.HANG_EXIT_CODE]
    (record,) = [v for k, v in kv.items() if k.startswith("summary/run/1/hangs/")]
    assert (record["rank"], record["step"], record["frozen"]) == (0, 0, [])
    # This host reports: its [hang] lines and its stacks, which hold this very test's frame.
    shown = [e.fields["what"] for e in events("\n".join(said), EventKind.HANG)]
    assert shown[0].startswith("no step, eval or save for 31s on host 0 (bound 30s")
    assert shown[1].startswith("host 0: step 0, 31s ago; alive, waiting")
    (stacks,) = (tmp_path / "hangs").iterdir()
    assert stacks.name.startswith("step-1-host-0-pid-")
    assert "test_the_watchdog_waits_out_any_compile_then_fires_once_past_the_bound" in (
        stacks.read_text()
    )
    assert kv["summary/run/1/hang-reported"]["at"] == clock[0]


def test_the_reporter_reads_a_frozen_hosts_stacks_from_outside(tmp_path, kv, monkeypatch):
    from launcher.runtime.train import hang_watchdog

    stopped = subprocess.Popen(
        [sys.executable, "-c", "import time\ndef stuck_in_input_pipeline():\n"
         "    time.sleep(600)\nstuck_in_input_pipeline()"]
    )  # fmt: skip
    try:
        time.sleep(1)
        stopped.send_signal(signal.SIGSTOP)
        # The Ray task on the frozen host's node, run here: py-spy on the stopped process.
        monkeypatch.setattr(
            hang_watchdog, "frozen_host_stacks", lambda h: hang_watchdog.dump_stacks_of(h.pid)
        )
        clock = [1000.0]
        dog, tracker, said, ended = _watchdog(tmp_path, kv, clock)
        tracker.step(11, clock[0])
        kv["summary/run/1/heartbeats/1"] = Heartbeat(
            1, stopped.pid, "node1", "10.0.0.1", 11, clock[0], clock[0]
        ).to_json()
        clock[0] += 40
        dog.check()
    finally:
        stopped.kill()
    assert ended == [hangs.HANG_EXIT_CODE]
    frozen = tmp_path / "hangs" / f"step-12-host-1-pid-{stopped.pid}.txt"
    assert "stuck_in_input_pipeline" in frozen.read_text()
    log = "\n".join(said)
    assert f"stacks of host 1 (pid {stopped.pid}, read by py-spy from host 0): {frozen}" in log
    assert "stuck_in_input_pipeline" in log
    assert "host 1: step 11, 40s ago; frozen: no heartbeat for 40s" in log


def test_a_live_host_that_does_not_report_waits_for_the_reporter(tmp_path, kv, monkeypatch):
    monkeypatch.setattr(hangs, "REPORT_WAIT_S", 0.5)
    clock = [1000.0]
    dog, tracker, said, ended = _watchdog(tmp_path, kv, clock, rank=1)
    kv["summary/run/1/heartbeats/0"] = _beat(0, clock[0] + 39).to_json()  # rank 0 is alive
    tracker.step(11, clock[0])
    clock[0] += 40
    dog.check()
    assert ended == [hangs.HANG_EXIT_CODE]
    assert not events("\n".join(said), EventKind.HANG)  # rank 0 speaks for the hang
    assert any((tmp_path / "hangs").glob("step-12-host-1-pid-*.txt"))  # its own stacks


def test_the_failure_policy_charges_hangs_to_their_own_budget():
    from ray.train.v2._internal.execution.failure_handling import FailureDecision
    from ray.train.v2.api.config import FailureConfig
    from ray.train.v2.api.exceptions import WorkerGroupError

    from launcher.runtime.job.hang_policy import HangBudgetPolicy

    records: set[str] = set()
    policy = HangBudgetPolicy(FailureConfig(max_failures=1), 2, "s", lambda key: set(records))
    error = WorkerGroupError("host 0 exited", {0: RuntimeError("exit 75")})
    for n in range(2):
        records.add(f"s/hangs/{n}-0")
        assert policy.make_decision(error) is FailureDecision.RETRY
    # The failure budget is untouched by the hangs: one failure is still allowed, not two.
    assert policy.make_decision(error) is FailureDecision.RETRY
    assert policy.make_decision(error) is FailureDecision.RAISE
    records.add("s/hangs/2-0")
    assert policy.make_decision(error) is FailureDecision.RAISE  # a third hang: over --max_hangs
    assert policy.hangs == 3


def test_the_trainer_builds_the_hang_policy_only_inside_the_fit():
    from ray.train.v2.api import data_parallel_trainer
    from ray.train.v2.api.config import FailureConfig

    from launcher.runtime.job.hang_policy import HangBudgetPolicy, with_hang_budget

    with with_hang_budget(4, "s"):
        built = data_parallel_trainer.create_failure_policy(FailureConfig(max_failures=1))
        assert isinstance(built, HangBudgetPolicy) and built.max_hangs == 4
    assert not isinstance(
        data_parallel_trainer.create_failure_policy(FailureConfig()), HangBudgetPolicy
    )


def test_a_notice_on_capacity_gke_does_not_reclaim_is_charged_to_the_failures():
    """Ray charges a host drained for preemption to --max_preemptions; a notice the hosts
    recorded on on-demand capacity (launcher.runtime.cluster.node_capacity) goes to --max_failures,
    one on Spot stays a preemption."""
    from ray.train.v2._internal.execution.failure_handling import FailureDecision
    from ray.train.v2.api.config import FailureConfig
    from ray.train.v2.api.exceptions import PreemptionError
    from ray.train.v2.api.preemption import PreemptionInfo

    from launcher.runtime.job.hang_policy import HangBudgetPolicy

    notices: dict[str, dict] = {}
    policy = HangBudgetPolicy(
        FailureConfig(max_failures=1, max_preemption_failures=5),
        0,
        "s",
        lambda key: set(),
        lambda key: dict(notices),
    )
    preempted = PreemptionError(PreemptionInfo(None, {"node-0": [0]}))
    spot = {"at": 1.0, "capacity": "spot", "preemptible": True}
    on_demand = {"at": 2.0, "capacity": "on-demand", "preemptible": False}
    notices["s/notices/1-0"] = spot
    assert policy.make_decision(preempted) is FailureDecision.RETRY  # a preemption
    notices["s/notices/2-0"] = on_demand
    assert policy.make_decision(preempted) is FailureDecision.RETRY  # failure 1 of 1
    notices["s/notices/3-0"] = on_demand
    assert policy.make_decision(preempted) is FailureDecision.RAISE  # failure 2: over
    # No notice recorded (a host not told), or no capacity known: Ray's own preemption.
    fresh = HangBudgetPolicy(FailureConfig(max_failures=0), 0, "s", lambda k: set(), lambda k: {})
    assert fresh.make_decision(preempted) is FailureDecision.RETRY
