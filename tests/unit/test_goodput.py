"""Goodput from a job's own events: the parts add up to the wall time, compile is JAX's measure,
the save's blocking time lands on the step after it, an eval's too, what a start leaves running
is start-up, and steps computed again after a restart are lost, not productive. The events are
written here as MaxText and the worker record them."""

from __future__ import annotations

import pytest

from launcher.core.job.goodput import (
    Attempt,
    StepPoint,
    breakdown,
    format_breakdown,
    format_compile_cache,
    format_timeline,
    startup_timeline,
)
from launcher.runtime.job.plots import loss_sparkline

pytestmark = pytest.mark.unit


def _attempt(
    start: float,
    steps: range,
    *,
    first_seconds: float,
    ckpt_every: int = 5,
    setup: float = 10.0,
    compile_seconds: float = 6.0,
    waits: dict[int, float] | None = None,
    evals: tuple[int, ...] = (),
) -> Attempt:
    """Steps of 1 s, as MaxText's loop times and logs them: after step s's clock stops its
    iteration waits (a save: 0.5 s; an eval; `waits[s]`) before writing step s - 1's line, and
    that wait is on step s + 1's clock; the last step's line comes after the loop."""
    attempt = Attempt(started_at=start, workers=2, compile_seconds=compile_seconds)
    waited = dict(waits or {})
    for step in steps:
        if step % ckpt_every == 0:
            waited[step] = waited.get(step, 0.0) + 0.5
            attempt.checkpoints.append((step, 0.0))
        if step in evals:
            attempt.evals.append((step, 4.0))
    t, stops, seconds = start + setup, [], []
    for n, step in enumerate(steps):
        seconds.append(first_seconds if n == 0 else 1.0 + waited.get(step - 1, 0.0))
        t += seconds[-1]
        stops.append(t)
    for n, step in enumerate(steps):
        if n + 1 < len(stops):
            logged = stops[n + 1] + waited.get(steps[n + 1], 0.0)
        else:
            logged = stops[n] + waited.get(step, 0.0)
        attempt.steps.append(StepPoint(step, seconds[n], logged, 5.0 / (step + 1), 100.0))
    return attempt


def _adds_up(result: dict) -> None:
    assert sum(result.parts.values()) == pytest.approx(result.wall_seconds, abs=1e-6)
    assert abs(result.unaccounted_seconds) < 1e-6


def test_one_run_splits_into_its_parts():
    attempt = _attempt(100.0, range(20), first_seconds=3.0)
    result = breakdown([attempt], started_at=95.0, ended_at=attempt.steps[-1].logged_at + 2.0)
    parts = result.parts
    _adds_up(result)
    assert parts["startup"] == pytest.approx(5.0 + 10.0 + 2.0 - 6.0)  # scheduling + set-up
    assert parts["compile"] == pytest.approx(6.0)
    # 20 steps of 1 s each are the work; the 4 steps after a save (1, 6, 11, 16) waited 0.5 s.
    assert parts["productive"] == pytest.approx(20.0)
    assert parts["checkpoint"] == pytest.approx(2.0)
    assert parts["other"] == pytest.approx(2.0)  # after the last step
    assert result.goodput == pytest.approx(20.0 / result.wall_seconds)


def test_steps_computed_again_after_a_restart_are_lost():
    first = _attempt(100.0, range(13), first_seconds=3.0)  # dies after step 12
    # The restart resumes after checkpoint 10: steps 11 and 12 are computed twice.
    second = _attempt(first.steps[-1].logged_at + 20.0, range(11, 30), first_seconds=3.0)
    end = second.steps[-1].logged_at + 1.0
    result = breakdown([second, first], started_at=100.0, ended_at=end)  # any order
    parts = result.parts
    _adds_up(result)
    # Lost: steps 11 (1.5 s after the save at 10) and 12, the 20 s until the restart, and the
    # restart's set-up beyond its compile.
    assert parts["restarts"] == pytest.approx(1.5 + 1.0 + 20.0 + (10.0 + 2.0 - 6.0))
    assert parts["compile"] == pytest.approx(12.0)
    assert parts["productive"] == pytest.approx(30.0)  # steps 0-29 once each


def test_what_a_restart_leaves_running_is_recovery_and_no_part_falls_below_zero():
    # The e2e test's killed host, in CI: the restarted group dispatched steps 11 and 12, then
    # waited 15 s for step 11's results (its restore was still reading). That wait delays
    # step 11's line and is on step 13's clock: counted once, as recovery.
    first = _attempt(100.0, range(13), first_seconds=3.0)
    second = _attempt(
        first.steps[-1].logged_at + 20.0, range(11, 30), first_seconds=3.0, waits={12: 15.0}
    )
    end = second.steps[-1].logged_at + 1.0
    result = breakdown([first, second], started_at=100.0, ended_at=end)
    parts = result.parts
    _adds_up(result)
    assert min(parts.values()) >= 0.0, parts
    assert parts["restarts"] == pytest.approx(1.5 + 1.0 + 20.0 + (10.0 + 2.0 - 6.0) + 15.0)
    assert parts["productive"] == pytest.approx(30.0)
    assert parts["other"] == pytest.approx(1.0)  # after the last step


def test_an_eval_is_other_not_productive():
    attempt = _attempt(100.0, range(20), first_seconds=3.0, waits={9: 4.0}, evals=(9,))
    result = breakdown([attempt], started_at=100.0, ended_at=attempt.steps[-1].logged_at + 2.0)
    _adds_up(result)
    assert result.parts["other"] == pytest.approx(4.0 + 2.0)
    assert result.parts["productive"] == pytest.approx(20.0)


def test_a_run_with_no_step_is_all_start_up():
    result = breakdown([Attempt(started_at=5.0)], started_at=0.0, ended_at=30.0)
    assert result.parts["startup"] == 30.0 and result.goodput == 0.0


def test_the_breakdown_reads_as_a_table():
    attempt = _attempt(0.0, range(10), first_seconds=2.0)
    lines = format_breakdown(breakdown([attempt], 0.0, attempt.steps[-1].logged_at))
    assert lines[0].startswith("goodput:")
    assert [line.split()[0] for line in lines[1:]] == [
        "scheduling",
        "compile",
        "productive",
        "checkpoint",
        "restarts",
        "other",
    ]


def test_the_loss_sparkline_falls_with_the_loss():
    line = loss_sparkline([5.0 - i * 0.04 for i in range(100)], width=10)
    first, bars, last = line.split()
    assert (float(first), float(last)) == (pytest.approx(4.82), pytest.approx(1.22))
    assert len(bars) == 10 and bars[0] == "█" and bars[-1] == "▁"


def test_the_compile_cache_line_counts_programs():
    cache = {"dir": "/b/run/jax_cache", "hits": 1, "saved_seconds": 7.84}
    assert format_compile_cache(cache) == (
        "compile cache: /b/run/jax_cache (1 program loaded from it, 7.8s of compiling saved; "
        "shared by the runs of its directory)"
    )
    assert "(0 programs loaded" in format_compile_cache({**cache, "hits": 0})


def test_each_starts_timeline_adds_up_to_its_time_to_the_first_step():
    first = Attempt(started_at=105.0, startup_compile_seconds=20.0, compile_seconds=25.0)
    first.steps = [StepPoint(0, 1.0, 140.0, 5.0, 10.0), StepPoint(1, 1.0, 141.0, 4.9, 10.0)]
    # A restart: its workers come up after the first start's last sign (step 1 at 141 s).
    again = Attempt(
        started_at=160.0, restore_seconds=3.0, startup_compile_seconds=2.0, compile_cache_hits=3
    )
    again.compile_seconds_saved = 18.0
    again.steps = [StepPoint(2, 1.0, 170.0, 4.8, 10.0)]
    never = Attempt(started_at=180.0)
    first_t, again_t, never_t = startup_timeline([again, never, first], started_at=100.0)
    assert first_t == {
        "workers": 5.0, "restore": 0.0, "compile": 20.0, "other": 15.0, "total": 40.0,
        "programs_loaded": 0, "compile_saved": 0.0,
    }  # fmt: skip
    assert (again_t["workers"], again_t["restore"], again_t["compile"]) == (19.0, 3.0, 2.0)
    assert again_t["total"] == 29.0 and again_t["other"] == 5.0
    assert never_t is None
    lines = format_timeline([first_t, again_t, never_t])
    assert lines[0] == "start-up:" and lines[3] == "  start 3: no step"
    assert lines[2] == (
        "  start 2: 29.0s to its first step = workers up 19.0s + restore 3.0s + compile 2.0s "
        "(3 programs from the cache, 18.0s saved) + model, data and first step 5.0s"
    )


def test_a_run_with_no_step_clock_is_measured_by_the_scripts_own_time_for_every_reader():
    """A script that reports no steps: the step breakdown says 0% (all start-up); by wall time
    it is the script's run in the start that finished, and that one record is what the summary,
    `status` and the history print (format_breakdown of the result's goodput)."""
    from launcher.core.job.goodput import by_wall_time, format_breakdown

    steps_view = breakdown([Attempt(started_at=10.0)], 0.0, 100.0)
    assert steps_view.goodput == 0.0
    walled = by_wall_time(steps_view, 60.0)
    assert walled.goodput == pytest.approx(0.6) and walled.wall_seconds == 100.0
    assert walled.parts["productive"] == 60.0 and walled.parts["startup"] == 40.0
    (line,) = format_breakdown(walled)
    assert line.startswith("goodput:      60% of 100s wall time by wall time: the script ran 60s")
    assert by_wall_time(steps_view, 500.0).goodput == 1.0  # never more than the wall time
