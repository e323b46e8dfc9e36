"""Restarts told apart from the job's own events: a preemption whose notice gave time to save
(the step saved on it, nothing computed again), one whose notice was too short (back to the
last periodic checkpoint, and why), one that no notice reached, and a failure. The events are
written here as the workers record them (launcher.runtime.job.host). And preflight's estimate
of the save a notice starts, against the grace period the values give it."""

from __future__ import annotations

import math

import pytest

from harness.paths import REPO
from launcher.core.job.goodput import Attempt, StepPoint
from launcher.core.tpu.preemption import (
    DEFAULT_GRACE_S,
    DRAIN_REASON,
    FAILED,
    PREEMPTED,
    PRESTOP_MARGIN_S,
    drain_args,
    restarts,
)
from launcher.core.tpu.slices import TpuSlices
from launcher.core.tpu.table import slice_shape
from launcher.core.values_file import load_values, release_facts
from launcher.preflight.memory_report import MemoryReport
from launcher.preflight.save_estimate import SAVE_GIB_PER_S, estimate_save

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
    (r,) = restarts([first, second], [notice], drains=[150.0])
    assert (r.cause, r.saved_step, r.resumed_at, r.recomputed) == (PREEMPTED, 27, 28, 0)
    assert r.notice_seconds == 20.0
    assert "step 27 saved on it; resumed at step 28, 0 steps computed again" in r.describe()


def test_a_periodic_save_between_the_notice_and_the_save_on_it_is_not_the_save_on_it():
    # Seen on the local cluster: notice at step 27, the periodic save of step 40 came before the
    # hosts reached the sync step 41, which was saved on the notice; resumed at 42.
    first = _attempt(100.0, range(41), [(20, 120.0), (40, 148.0), (41, 149.0)])
    second = _attempt(200.0, range(42, 50), [])
    notice = {"at": 137.0, "deadline": 152.0, "source": "ray drain"}
    (r,) = restarts([first, second], [notice], drains=[150.0])
    assert (r.saved_step, r.resumed_at, r.recomputed) == (41, 42, 0)
    assert "step 41 saved on it" in r.describe()


def test_a_notice_too_short_to_save_falls_back_to_the_periodic_checkpoint_and_says_why():
    first = _attempt(100.0, range(27), [(10, 120.0), (20, 130.0)])
    second = _attempt(200.0, range(21, 40), [])
    notice = {"at": 140.0, "deadline": 140.0, "source": "ray drain"}
    (r,) = restarts([first, second], [notice], drains=[150.0])
    assert (r.cause, r.saved_step, r.resumed_at, r.recomputed) == (PREEMPTED, None, 21, 6)
    assert "the 0 s notice was too short to save" in r.describe()
    assert "ray.worker.terminationGracePeriodSeconds" in r.describe()
    # The attempt's record goes every 10 s; the steps logged after it are counted from the
    # last step rank 0 wrote apart (seen: a record left at step 20, the host gone at 27,
    # resumed at 21: 0 computed again, said the summary, before the last step was kept).
    stale = _attempt(100.0, range(21), [(10, 120.0), (20, 130.0)])
    stale.last_step = 27
    (r,) = restarts([stale, second], [notice], drains=[150.0])
    assert (r.resumed_at, r.recomputed) == (21, 7)
    # A periodic save that commits just after a 0 s notice (seen in the preemption e2e test:
    # step 40 committed in the moment before the host went) is not a save on the notice.
    periodic = _attempt(100.0, range(27), [(10, 120.0), (20, 140.5)])
    (r,) = restarts([periodic, second], [notice], drains=[150.0])
    assert r.saved_step is None and "the 0 s notice was too short to save" in r.describe()


def test_a_reclaim_no_notice_reached_and_a_failure():
    first = _attempt(100.0, range(12), [(10, 120.0)])
    second = _attempt(200.0, range(11, 20), [])
    (preempted,) = restarts([first, second], [], drains=[150.0, 151.0])
    assert (preempted.cause, preempted.notice_seconds, preempted.recomputed) == (PREEMPTED, None, 1)
    assert "no notice reached the job" in preempted.describe()
    (failed,) = restarts([first, second], [])
    assert failed.cause == FAILED and "a failure" in failed.describe()
    # A notice from before the attempt started belongs to an earlier restart, not this one.
    old = {"at": 50.0, "deadline": 80.0, "source": "ray drain"}
    assert restarts([first, second], [old])[0].cause == FAILED


def test_a_killed_host_beside_a_noticed_preemption_is_a_failure():
    """The one host Ray saw drained is the noticed preemption's: the kill before it is not."""
    first = _attempt(100.0, range(12), [(9, 120.0)])
    second = _attempt(200.0, range(10, 30), [(29, 260.0)])
    third = _attempt(300.0, range(30, 40), [])
    notice = {"at": 250.0, "deadline": 280.0, "source": "ray drain"}
    killed, noticed = restarts([first, second, third], [notice], drains=[280.0])
    assert (killed.cause, noticed.cause) == (FAILED, PREEMPTED)
    # With a host drained in the first window too (a notice too short to reach the job), the
    # first restart is a preemption as well.
    assert restarts([first, second, third], [notice], [150.0, 280.0])[0].cause == PREEMPTED
    # Read while the job runs, before the third start has trained (the driver's metrics every
    # 10 s): the drain after the second start names no restart seen yet; the kill's restart
    # stays a failure (seen in the PyTorch e2e test: a drained-host count named it preempted,
    # and the restarts counter, which cannot count back, read failed=2 at the end).
    (killed,) = restarts([first, second], [notice], drains=[280.0])
    assert killed.cause == FAILED


def test_the_notice_is_rays_drain_for_preemption_with_the_deadline():
    args = drain_args("10.0.0.1:6379", "abc", 25.4, "pod terminating")
    assert args[:2] == ["ray", "drain-node"]
    assert f"--reason={DRAIN_REASON}" in args and "--deadline-remaining-seconds=25" in args
    assert "--node-id=abc" in args and "--address=10.0.0.1:6379" in args
    # A deadline already past is now, never negative (Ray refuses those).
    assert "--deadline-remaining-seconds=0" in drain_args(None, None, -3, "m")


def _report(arguments_gib: float) -> MemoryReport:
    return MemoryReport("v6e-16", 32.0, arguments_gib, 0.0, 0.0, 1.0, 1.0, fits=True)


V6E_16 = TpuSlices(slice_shape("v6e", "4x4"))  # 4 hosts x 4 chips


def test_the_save_estimate_is_the_state_of_a_hosts_devices_against_the_grace_period():
    small = estimate_save(_report(2.0), V6E_16, 30, "values/v6e-16.yaml")
    assert small is not None
    assert (small.gib_per_host, small.gib_total) == (8.0, 32.0)  # 4 devices a host, 4 hosts
    # 8 s at SAVE_GIB_PER_S, twice over, plus the hook's margin, in tens.
    expected = math.ceil((2 * 8.0 / SAVE_GIB_PER_S + PRESTOP_MARGIN_S) / 10) * 10
    assert small.needed_grace == expected and small.fits == (expected <= 30)
    assert "(32.00 GiB in all, 8.00 GiB per host)" in small.render()

    big = estimate_save(_report(12.0), V6E_16, 30, "values/v6e-16.yaml")
    assert big is not None and not big.fits and big.needed_grace > 30
    text = big.render()
    assert "TOO SHORT" in text and f"terminationGracePeriodSeconds: {big.needed_grace}" in text

    silent = estimate_save(_report(2.0), V6E_16, None, "release r")
    assert silent is not None and not silent.fits
    assert "NO SAVE ON A NOTICE (a reclaim resumes from the last periodic" in silent.render()
    # XLA stopped at the overflow: the state was never measured, so nothing is estimated.
    assert estimate_save(_report(0.0), V6E_16, 30, "x") is None


@pytest.mark.parametrize(
    ("worker", "grace"),
    [
        ({}, DEFAULT_GRACE_S),
        ({"terminationGracePeriodSeconds": 120}, 120),
        ({"terminationGracePeriodSeconds": None}, None),
    ],
)
def test_a_values_files_grace_period_falls_back_to_the_charts_default(worker, grace):
    chart = REPO / "charts" / "tpu-stack" / "values.yaml"
    values = load_values(chart, REPO / "values" / "v6e-16.yaml")
    values["ray"]["worker"].pop("terminationGracePeriodSeconds", None)
    values["ray"]["worker"].update(worker)
    assert release_facts(values, "tpu").grace_seconds == grace


def test_a_script_that_reports_no_steps_still_has_its_restarts_counted_and_their_causes():
    """torchrun's script, unchanged: no step lines, so only the starts say a restart happened;
    a notice in a restart's window names it, and the launcher claims nothing of where it went
    on from."""
    starts = [Attempt(started_at=t) for t in (0.0, 100.0, 200.0)]
    notices = [{"at": 150.0, "deadline": 180.0}]
    failed, preempted = restarts(starts, notices)
    assert (failed.start, failed.cause, failed.resumed_at) == (2, FAILED, None)
    assert (preempted.start, preempted.cause, preempted.recomputed) == (3, PREEMPTED, 0)
    assert "reports no steps" in failed.describe() and "step" not in failed.describe()[:20]
    assert preempted.describe().startswith("start 3: preempted; the script reports no steps")
    # A job that reports steps: a start that never trained is no restart (torn down early).
    stepped = [
        _attempt(0.0, range(5), []),
        Attempt(started_at=50.0),
        _attempt(60.0, range(3, 9), []),
    ]
    (only,) = restarts(stepped, [])
    assert (only.start, only.resumed_at) == (2, 3)


def test_a_preemption_names_the_hosts_taken_back_and_says_their_slice_went_with_them():
    """The notices of a restart's window name the drained hosts (`<slice>/<worker id>`, from
    their Ray nodes' labels): the restart and its line name them, not the slice's every rank
    that Ray stops with them (its TPU failure domain is the slice)."""
    from launcher.core.job.events import format_preempted
    from launcher.core.tpu.slices import host_name

    named = host_name({"ray.io/tpu-slice-name": "local-slice-0", "ray.io/tpu-worker-id": "1"})
    assert named == "local-slice-0/1" and host_name({}) is None
    starts = [_attempt(0.0, range(10), [(9, 40.0)]), _attempt(100.0, range(10, 20), [])]
    notices = [
        {"at": 30.0, "deadline": 45.0, "hosts": [named]},
        {"at": 31.0, "deadline": 45.0},  # a host that read no names
    ]
    (restart,) = restarts(starts, notices)
    assert restart.hosts == ("local-slice-0/1",)
    assert restart.describe().startswith("start 2: preempted (local-slice-0/1 taken back), 15 s")
    line = format_preempted(10, 15.0, restart.hosts)
    assert line == (
        "[preempted] host local-slice-0/1 was taken back (15 s notice), and with it every rank "
        "of its slice; resumed at step 10"
    )
    assert format_preempted(10, None).startswith("[preempted] a host was taken back (no deadline)")
