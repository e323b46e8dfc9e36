"""Reads back `--record_examples` (launcher.runtime.train.example_record): which examples each step
of a run trained on, per host, as MaxText's train loop got them, across restarts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from launcher.runtime.train.example_record import RECORD_SUBDIR, read_records


def final_history(run_dir: Path) -> dict[int, dict[int, list[str]]]:
    """host -> step -> the examples of the start whose computation of that step stands: the
    latest start that ran it (a restart computes again the steps after the checkpoint)."""
    history: dict[int, dict[int, list[str]]] = {}
    for _, host, steps in read_records(run_dir / RECORD_SUBDIR):  # oldest start first
        history.setdefault(host, {}).update(steps)
    return history


def recomputed_steps_differ(run_dir: Path) -> list[tuple[int, int]]:
    """(host, step) where a later start's batch for a step differs from an earlier start's: a
    resume that did not go on where the data stopped."""
    seen: dict[tuple[int, int], list[str]] = {}
    differ = []
    for _, host, steps in read_records(run_dir / RECORD_SUBDIR):
        for step, examples in steps.items():
            earlier = seen.setdefault((host, step), examples)
            if earlier != examples:
                differ.append((host, step))
    return differ


def audit(run_dir: Path, steps: int) -> dict[str, int]:
    """Exactly once: every step 0..steps-1 on every host, no example twice across the run's
    history (one epoch), recomputed steps identical. Returns the counts it checked."""
    history = final_history(run_dir)
    assert history, f"no example record under {run_dir / RECORD_SUBDIR}"
    seen: Counter[str] = Counter()
    for host, by_step in history.items():
        missing = sorted(set(range(steps)) - set(by_step))
        assert not missing, f"host {host} recorded no batch for steps {missing}"
        for step in range(steps):
            seen.update(by_step[step])
    twice = {h: n for h, n in seen.items() if n > 1}
    assert not twice, f"{len(twice)} examples trained on more than once: {list(twice)[:5]}"
    differ = recomputed_steps_differ(run_dir)
    assert not differ, f"a restart computed these (host, step) on other examples: {differ[:5]}"
    starts = sum(1 for _, host, _ in read_records(run_dir / RECORD_SUBDIR) if host == 0)
    return {"examples": len(seen), "hosts": len(history), "starts": starts}
