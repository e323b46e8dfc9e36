"""Restarts told apart from the job's own events: a preemption whose notice gave time to save
(the step saved on it, nothing computed again), one whose notice was too short (back to the
last periodic checkpoint, and why), one that no notice reached, and a failure. The events are
written here as the workers record them (launcher.runtime.worker)."""

from __future__ import annotations

import pytest

from launcher.core.goodput import Attempt, StepPoint
from launcher.core.preemption import DRAIN_REASON, FAILED, PREEMPTED, drain_args, restarts

pytestmark = pytest.mark.unit


def _attempt(start: float, steps: range, saves: list[tuple[int, float]]) -> Attempt:
    return Attempt(
        started_at=start,
        steps=[StepPoint(s, 1.0, start + 10 + n, 1.0, 100.0) for n, s in enumerate(steps)],
        checkpoints=saves,
    )


def test_a_notice_with_time_to_save_costs_no_step():
    # Steps 0..26 logged; notice at 140; step 27 saved on it at 142; resumed at 28.
    first = _attempt(100.0, range(27), [(10, 120.0), (20, 130.0), (27, 142.0)])
    second = _attempt(200.0, range(28, 40), [])
    notice = {"at": 140.0, "deadline": 160.0, "source": "ray drain"}
    (r,) = restarts([first, second], [notice], preempted_hosts=1)
    assert (r.cause, r.saved_step, r.resumed_at, r.recomputed) == (PREEMPTED, 27, 28, 0)
    assert r.notice_seconds == 20.0
    assert "step 27 saved on it; resumed at step 28, 0 steps computed again" in r.describe()


def test_a_notice_too_short_to_save_falls_back_to_the_periodic_checkpoint_and_says_why():
    first = _attempt(100.0, range(27), [(10, 120.0), (20, 130.0)])
    second = _attempt(200.0, range(21, 40), [])
    notice = {"at": 140.0, "deadline": 140.0, "source": "ray drain"}
    (r,) = restarts([first, second], [notice], preempted_hosts=1)
    assert (r.cause, r.saved_step, r.resumed_at, r.recomputed) == (PREEMPTED, None, 21, 6)
    assert "the 0 s notice was too short to save" in r.describe()
    assert "ray.worker.terminationGracePeriodSeconds" in r.describe()


def test_a_reclaim_no_notice_reached_and_a_failure():
    first = _attempt(100.0, range(12), [(10, 120.0)])
    second = _attempt(200.0, range(11, 20), [])
    (preempted,) = restarts([first, second], [], preempted_hosts=2)
    assert (preempted.cause, preempted.notice_seconds, preempted.recomputed) == (PREEMPTED, None, 1)
    assert "no notice reached the job" in preempted.describe()
    (failed,) = restarts([first, second], [], preempted_hosts=0)
    assert failed.cause == FAILED and "a failure" in failed.describe()
    # A notice from before the attempt started belongs to an earlier restart, not this one.
    old = {"at": 50.0, "deadline": 80.0, "source": "ray drain"}
    assert restarts([first, second], [old], preempted_hosts=0)[0].cause == FAILED


def test_the_notice_is_rays_drain_for_preemption_with_the_deadline():
    args = drain_args("10.0.0.1:6379", "abc", 25.4, "pod terminating")
    assert args[:2] == ["ray", "drain-node"]
    assert f"--reason={DRAIN_REASON}" in args and "--deadline-remaining-seconds=25" in args
    assert "--node-id=abc" in args and "--address=10.0.0.1:6379" in args
    # A deadline already past is now, never negative (Ray refuses those).
    assert "--deadline-remaining-seconds=0" in drain_args(None, None, -3, "m")
