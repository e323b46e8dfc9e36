"""Goodput from a job's own events: the parts add up to the wall time, compile is JAX's measure,
the save's blocking time lands on the step after it, and steps computed again after a restart
are lost, not productive. The events are written here as MaxText and the worker record them."""

from __future__ import annotations

import pytest

from launcher.core.goodput import (
    Attempt,
    StepPoint,
    breakdown,
    format_breakdown,
    format_compile_cache,
)
from launcher.runtime.plots import loss_sparkline

pytestmark = pytest.mark.unit


def _attempt(
    start: float,
    steps: range,
    *,
    first_seconds: float,
    ckpt_every: int = 5,
    setup: float = 10.0,
    compile_seconds: float = 6.0,
) -> Attempt:
    """Steps of 1 s; the one after a checkpoint takes 1.5 s. As MaxText logs them: a step's line
    comes when the next step ends, the last one's at the end of the loop."""
    attempt = Attempt(started_at=start, workers=2, compile_seconds=compile_seconds)
    t, ends, durations = start + setup, [], []
    for n, step in enumerate(steps):
        durations.append(first_seconds if n == 0 else 1.5 if (step - 1) % ckpt_every == 0 else 1.0)
        t += durations[-1]
        ends.append(t)
        if step % ckpt_every == 0:
            attempt.checkpoints.append((step, t))
    for n, step in enumerate(steps):
        logged = ends[n + 1] if n + 1 < len(ends) else ends[n]
        attempt.steps.append(StepPoint(step, durations[n], logged, 5.0 / (step + 1), 100.0))
    return attempt


def _adds_up(result: dict) -> None:
    assert sum(result["parts"].values()) == pytest.approx(result["wall_seconds"], abs=1e-6)
    assert abs(result["unaccounted_seconds"]) < 1e-6


def test_one_run_splits_into_its_parts():
    attempt = _attempt(100.0, range(20), first_seconds=3.0)
    result = breakdown([attempt], started_at=95.0, ended_at=attempt.steps[-1].logged_at + 2.0)
    parts = result["parts"]
    _adds_up(result)
    assert parts["startup"] == pytest.approx(5.0 + 10.0 + 2.0 - 6.0)  # scheduling + set-up
    assert parts["compile"] == pytest.approx(6.0)
    # 20 steps of 1 s each are the work; the 4 steps after a save (1, 6, 11, 16) waited 0.5 s.
    assert parts["productive"] == pytest.approx(20.0)
    assert parts["checkpoint"] == pytest.approx(2.0)
    assert parts["other"] == pytest.approx(2.0)  # after the last step
    assert result["goodput"] == pytest.approx(20.0 / result["wall_seconds"])


def test_steps_computed_again_after_a_restart_are_lost():
    first = _attempt(100.0, range(13), first_seconds=3.0)  # dies after step 12
    # The restart resumes after checkpoint 10: steps 11 and 12 are computed twice.
    second = _attempt(first.steps[-1].logged_at + 20.0, range(11, 30), first_seconds=3.0)
    end = second.steps[-1].logged_at + 1.0
    result = breakdown([second, first], started_at=100.0, ended_at=end)  # any order
    parts = result["parts"]
    _adds_up(result)
    # Lost: steps 11 (1.5 s after the save at 10) and 12, the 20 s until the restart, and the
    # restart's set-up beyond its compile.
    assert parts["restarts"] == pytest.approx(1.5 + 1.0 + 20.0 + (10.0 + 2.0 - 6.0))
    assert parts["compile"] == pytest.approx(12.0)
    assert parts["productive"] == pytest.approx(30.0)  # steps 0-29 once each


def test_a_run_with_no_step_is_all_start_up():
    result = breakdown([Attempt(started_at=5.0)], started_at=0.0, ended_at=30.0)
    assert result["parts"]["startup"] == 30.0 and result["goodput"] == 0.0


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
        "compile cache: /b/run/jax_cache (1 program loaded from it, 7.8s of compiling saved)"
    )
    assert "(0 programs loaded" in format_compile_cache({**cache, "hits": 0})
