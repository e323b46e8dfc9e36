"""Where a job's wall time went, from its own events: each attempt's start, every step MaxText
logged (its number, its `seconds` and when it was logged), every checkpoint save and eval.

MaxText's `seconds` for a step runs from the previous step's clock stop to this one's, so the
first step after a (re)start carries what was not done before the loop, the step after a
checkpoint carries the save's blocking part, and the step after an eval carries the eval. With
JAX's asynchronous dispatch a step's clock stops once it is dispatched, and its line is written
in the next iteration, which waits for its results: what a start leaves running (step 0's
compute, a restore still reading) lands on the steps up to the third. A steady step is the
median of the others; what a step takes beyond it is start-up, checkpoint or eval time. Compile
time is JAX's own measure (its monitoring events), taken out of the start-up it happened in.
Steps computed again after a restart (those from the step the next start resumed at) are lost,
not productive. Every interval is counted once, so the parts add up to the wall time;
`unaccounted` shows any overlap (it stays near zero unless attempts overlap).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, fields, replace
from itertools import accumulate
from typing import Any


@dataclass
class StepPoint:
    step: int
    seconds: float
    logged_at: float
    loss: float
    tokens_per_device: float
    total_weights: float = 0.0  # tokens in the step's global batch


@dataclass
class Attempt:
    """One worker group's run (the first, or one after a restart), as rank 0 saw it. Every step
    is kept (about 100 bytes of JSON each: 10 MB for 100k steps), so every second is counted."""

    started_at: float
    workers: int = 0
    slices: int = 0  # TPU slices this start got (elastic jobs run on fewer than planned)
    # MEGASCALE_* as rank 0's MaxText saw them: Ray's values for this worker group, never
    # a stale pod's.
    megascale: dict[str, str] = field(default_factory=dict)
    steps: list[StepPoint] = field(default_factory=list)
    checkpoints: list[tuple[int, float]] = field(default_factory=list)  # (step, logged at)
    evals: list[tuple[int, float]] = field(default_factory=list)  # (after step, eval loss)
    compile_seconds: float = 0.0  # JAX's own measure: tracing, lowering, XLA compile
    # Programs JAX loaded from the persistent compilation cache, and the compile time they
    # took when they were first compiled (JAX's own figures).
    compile_cache_hits: int = 0
    compile_seconds_saved: float = 0.0
    # Of compile_seconds, what came before the start's first step; and Orbax's own measure of
    # its restores (both for the start-up timeline).
    startup_compile_seconds: float = 0.0
    restore_seconds: float = 0.0
    ended_at: float | None = None
    # How GKE provided rank 0's node (launcher.runtime.cluster.node_capacity; None: not known),
    # which prices the start's chips.
    capacity: str | None = None
    # The last step rank 0 logged, written twice a second apart from this record (which goes
    # every 10 s): a host reclaimed without notice leaves it, so the steps computed again after
    # the restart are counted in full.
    last_step: int | None = None
    # The memory tier (launcher.core.job.checkpoint_tiers): the saves that went to memory only,
    # and where this start's restore read its copy (None: no restore, or the bucket tier).
    memory_saves: list[int] = field(default_factory=list)
    restored_from: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attempt:
        return cls(
            started_at=data["started_at"],
            workers=data.get("workers", 0),
            slices=data.get("slices", 0),
            megascale=data.get("megascale", {}),
            steps=[StepPoint(**s) for s in data.get("steps", [])],
            checkpoints=[tuple(c) for c in data.get("checkpoints", [])],
            evals=[tuple(e) for e in data.get("evals", [])],
            compile_seconds=data.get("compile_seconds", 0.0),
            compile_cache_hits=data.get("compile_cache_hits", 0),
            compile_seconds_saved=data.get("compile_seconds_saved", 0.0),
            startup_compile_seconds=data.get("startup_compile_seconds", 0.0),
            restore_seconds=data.get("restore_seconds", 0.0),
            capacity=data.get("capacity"),
            ended_at=data.get("ended_at"),
            last_step=data.get("last_step"),
            memory_saves=data.get("memory_saves", []),
            restored_from=data.get("restored_from"),
        )


PARTS = (
    ("startup", "scheduling and start-up"),
    ("compile", "compile (JAX's own measure)"),
    ("productive", "productive steps"),
    ("checkpoint", "checkpoint saves that blocked"),
    ("restarts", "restarts (lost steps + recovery)"),
    ("other", "other (evals, the last save, shutdown)"),
)


@dataclass(frozen=True)
class Goodput:
    """Where a job's wall time went: seconds per part (PARTS), the share that was productive
    steps, and what the clocks leave unaccounted; `by` is WALL_TIME where no step clock split
    it (by_wall_time). The result line, `status --json`, `list --json` and the history carry
    its JSON."""

    wall_seconds: float
    parts: dict[str, float]
    goodput: float
    unaccounted_seconds: float
    by: str | None = None

    def to_json(self) -> dict[str, Any]:
        found = asdict(self)
        if self.by is None:
            del found["by"]
        return found

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Goodput:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


# The steps of a start that carry what the start left running: MaxText writes step n's line in
# iteration n + 1, waiting for step n's results, and that wait lands on step n + 2's clock.
WARM_UP_STEPS = 3


def breakdown(attempts: list[Attempt], started_at: float, ended_at: float) -> Goodput:
    """Seconds per part (PARTS), the wall time, goodput and what the clocks leave unaccounted."""
    parts = dict.fromkeys((key for key, _ in PARTS), 0.0)
    attempts = sorted((a for a in attempts if a.steps), key=lambda a: a.started_at)
    if not attempts:
        parts["startup"] = ended_at - started_at
        return _result(parts, ended_at - started_at)
    steady = _steady_seconds(attempts)
    parts["startup"] = attempts[0].started_at - started_at
    for i, attempt in enumerate(attempts):
        nxt = attempts[i + 1] if i + 1 < len(attempts) else None
        resumed_at = nxt.steps[0].step if nxt else None  # from this step on, redone later
        saved = {step for step, _ in attempt.checkpoints}
        evaluated = {step for step, _ in attempt.evals}
        first = attempt.steps[0]
        ends = _step_ends(attempt.steps)
        # Before the first step's clock started (restore, model and data set-up, and compiles
        # outside the loop), plus what the first steps took beyond a steady one: start-up (or
        # recovery, after a restart), of which JAX's measured compile time is compile.
        setup = ends[0] - first.seconds - attempt.started_at
        for n, point in enumerate(attempt.steps):
            work = min(point.seconds, steady)
            extra, extra_part = point.seconds - work, "other"
            if point.step - 1 in saved or point.step - 1 in evaluated:
                extra_part = "checkpoint" if point.step - 1 in saved else "other"
            elif n < WARM_UP_STEPS:
                setup, extra = setup + extra, 0.0
            else:
                work, extra = point.seconds, 0.0  # a slow step is still a step
            redone = resumed_at is not None and point.step >= resumed_at
            parts["restarts" if redone else "productive"] += work
            parts["restarts" if redone else extra_part] += extra
        compiled = min(attempt.compile_seconds, max(0.0, setup))
        parts["compile"] += compiled
        parts["startup" if i == 0 else "restarts"] += setup - compiled
        # After the last step: a failure until the next start, or the end of the job.
        tail_end = nxt.started_at if nxt else ended_at
        parts["restarts" if nxt else "other"] += tail_end - ends[-1]
    return _result(parts, ended_at - started_at)


def _step_ends(steps: list[StepPoint]) -> list[float]:
    """When each step's clock stopped. MaxText's `seconds` are exact differences of that clock;
    only the lines' times are absolute, and each comes after a stop: step n's line is written
    in iteration n + 1 (after that step's clock, save, eval and the wait for step n's results),
    the last one after the loop. So each line bounds the first stop from above, and the line
    that waited least bounds it best."""
    since_first = list(accumulate((p.seconds for p in steps[1:]), initial=0.0))
    last = len(steps) - 1
    first_end = min(p.logged_at - since_first[min(n + 1, last)] for n, p in enumerate(steps))
    return [first_end + s for s in since_first]


def _steady_seconds(attempts: list[Attempt]) -> float:
    plain = []
    for attempt in attempts:
        saved = {step for step, _ in attempt.checkpoints}
        plain += [p.seconds for p in attempt.steps[1:] if p.step - 1 not in saved]
    every = [p.seconds for a in attempts for p in a.steps]
    return statistics.median(plain or every)


def _result(parts: dict[str, float], wall: float) -> Goodput:
    accounted = sum(parts.values())
    productive = parts["productive"] / wall if wall > 0 else 0.0
    return Goodput(wall, parts, productive, wall - accounted)


def startup_timeline(attempts: list[Attempt], started_at: float) -> list[dict[str, Any] | None]:
    """Each start's way to its first step (None: it had none), from the job's own clock: the
    worker group up (Ray scheduling the workers, their processes, jax.distributed: from the
    driver's start, or the previous start's last sign, to rank 0's training function), Orbax's
    restore and JAX's compiles before the first step (their own measures), and the rest (the
    model's and the data pipeline's set-up, the first step's compute). The parts add up to the
    start's time to its first step; the rest is what no clock of its own measures."""
    found: list[dict[str, Any] | None] = []
    anchor = started_at
    for a in sorted(attempts, key=lambda a: a.started_at):
        if a.steps:
            total = a.steps[0].logged_at - anchor
            workers = a.started_at - anchor
            parts = {
                "workers": workers,
                "restore": a.restore_seconds,
                "compile": a.startup_compile_seconds,
                "other": total - workers - a.restore_seconds - a.startup_compile_seconds,
            }
            found.append(
                {
                    **{k: round(v, 2) for k, v in parts.items()},
                    "total": round(total, 2),
                    "programs_loaded": a.compile_cache_hits,
                    "compile_saved": round(a.compile_seconds_saved, 2),
                }
            )
        else:
            found.append(None)
        last_signs = [a.started_at, a.ended_at or 0.0, *(p.logged_at for p in a.steps[-1:])]
        anchor = max(last_signs)
    return found


def format_timeline(timeline: list[dict[str, Any] | None]) -> list[str]:
    """The summary's start-up lines, one a start."""
    lines = []
    for n, t in enumerate(timeline, 1):
        if t is None:
            lines.append(f"  start {n}: no step")
            continue
        lines.append(
            f"  start {n}: {t['total']:.1f}s to its first step = workers up {t['workers']:.1f}s "
            f"+ restore {t['restore']:.1f}s + compile {t['compile']:.1f}s "
            f"({t['programs_loaded']} programs from the cache, {t['compile_saved']:.1f}s saved) "
            f"+ model, data and first step {t['other']:.1f}s"
        )
    return ["start-up:", *lines] if lines else []


WALL_TIME = "wall time"  # what a run without a step clock is measured by


def by_wall_time(result: Goodput, script_seconds: float) -> Goodput:
    """A run with no step clock to split its time by (a script that reports no steps): the
    script's own time in the start that finished is what it did, the rest start-up and
    restarts. The summary, `status`, the history and the cost all read this one figure."""
    wall = result.wall_seconds
    ran = min(max(script_seconds, 0.0), wall)
    parts = dict.fromkeys(result.parts, 0.0)
    parts.update(productive=round(ran, 1), startup=round(wall - ran, 1))
    return replace(result, goodput=ran / wall if wall else 0.0, parts=parts, by=WALL_TIME)


def format_breakdown(result: Goodput) -> list[str]:
    if result.by == WALL_TIME:
        ran = result.parts["productive"]
        return [
            f"goodput:      {result.goodput:.0%} of {result.wall_seconds:.0f}s wall time "
            f"by wall time: the script ran {ran:.0f}s in the start that finished; start-up and "
            "restarts the rest (TorchJob.step_done splits it by steps)"
        ]
    wall = result.wall_seconds or 1.0
    lines = [f"goodput:      {result.goodput:.0%} of {result.wall_seconds:.0f}s wall time"]
    for key, label in PARTS:
        seconds = result.parts[key]
        lines.append(f"  {label:<40} {seconds:7.1f}s {seconds / wall:6.1%}")
    return lines


def saves_by_tier(attempts: list[Attempt]) -> dict[str, dict[str, Any]]:
    """Each checkpoint tier's saves and the time they blocked training (what the step after
    a save took beyond a steady step, as `breakdown` counts it), with the memory tier's saves
    apart from the bucket's (launcher.core.job.checkpoint_tiers)."""
    trained = sorted((a for a in attempts if a.steps), key=lambda a: a.started_at)
    if not trained:
        return {}
    steady = _steady_seconds(trained)
    found: dict[str, dict[str, Any]] = {}
    for attempt in trained:
        memory = set(attempt.memory_saves)
        after = {p.step - 1: p.seconds for p in attempt.steps}
        for step, _ in attempt.checkpoints:
            tier = found.setdefault(
                "memory" if step in memory else "bucket", {"saves": 0, "blocked_seconds": 0.0}
            )
            tier["saves"] += 1
            tier["blocked_seconds"] += max(0.0, after.get(step, steady) - steady)
    for tier in found.values():
        tier["blocked_seconds"] = round(tier["blocked_seconds"], 3)
    return found


def format_saves(saves: dict[str, dict[str, Any]], restored: list[str | None]) -> str | None:
    """The summary's line on the checkpoint tiers (None for a job with one tier)."""
    if "memory" not in saves and not any(restored):
        return None
    parts = []
    for tier, name in (("memory", "to memory"), ("bucket", "to the bucket")):
        if tier in saves:
            n, blocked = saves[tier]["saves"], saves[tier]["blocked_seconds"]
            parts.append(f"{n} {name} ({blocked:.1f}s blocked, {blocked / n:.2f}s a save)")
    line = "saves:        " + ", ".join(parts)
    restores = [f"start {i + 1} from {r}" for i, r in enumerate(restored) if r]
    return line + (f"; restored: {', '.join(restores)}" if restores else "")


def format_compile_cache(cache: dict[str, Any]) -> str:
    """The summary's line on JAX's persistent compilation cache (the result's compile_cache)."""
    hits = cache["hits"]
    return (
        f"compile cache: {cache['dir']} ({hits} program{'' if hits == 1 else 's'} loaded from "
        f"it, {cache['saved_seconds']:.1f}s of compiling saved; shared by the runs of its "
        "directory)"
    )
