"""Which checkpoints a run can resume from: one rule, Orbax's, for the local directory, the
mounted bucket and a gs:// listing alike.

Orbax writes `<step>/commit_success.txt` as the last act of a save (then, on a filesystem,
renames `<step>.orbax-checkpoint-tmp-*` to `<step>`). A step directory without the marker is an
interrupted save: MaxText must never resume from it, and nobody should count it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from launcher.core.errors import UsageError
from launcher.core.job.run_dir import CHECKPOINTS_SUBDIR
from launcher.core.maxtext.args import MaxTextArgs

COMMIT_MARKER = "commit_success.txt"


def is_committed(
    step_dir: PurePosixPath | Path, exists: Callable[[PurePosixPath | Path], bool] | None = None
) -> bool:
    """A step directory (named by its step number) whose save finished. `exists` answers for
    object stores; by default the local filesystem (the gcsfuse mount included) is asked."""
    if not step_dir.name.isdigit():
        return False
    marker = step_dir / COMMIT_MARKER
    return exists(marker) if exists else Path(marker).is_file()


def committed_steps(run_dir: Path, after: int = -1) -> list[int]:
    """The committed steps under `<run_dir>/checkpoints` later than `after`, oldest first. Only
    those steps' markers are asked for (on the bucket's mount each is a lookup)."""
    ckpt_dir = run_dir / CHECKPOINTS_SUBDIR
    if not ckpt_dir.is_dir():
        return []
    return sorted(
        int(p.name)
        for p in ckpt_dir.iterdir()
        if p.name.isdigit() and int(p.name) > after and p.is_dir() and is_committed(p)
    )


def committed_steps_in_listing(names: Iterable[str], run_prefix: str) -> list[int]:
    """The committed steps of a run from an object listing (gs:// blob names under the run)."""
    names = set(names)
    ckpt = PurePosixPath(run_prefix.strip("/")) / CHECKPOINTS_SUBDIR
    steps = {
        PurePosixPath(n).relative_to(ckpt).parts[0]
        for n in names
        if PurePosixPath(n).is_relative_to(ckpt) and PurePosixPath(n) != ckpt
    }
    return sorted(int(s) for s in steps if is_committed(ckpt / s, exists=lambda p: str(p) in names))


def resolve_steps(
    args: MaxTextArgs, run_dir: Path, steps_beyond_checkpoint: int | None
) -> MaxTextArgs:
    """Resolves --steps_beyond_checkpoint and refuses a run that would train nothing (MaxText
    would fail on every host after minutes of start-up; this says it in a second). A gs://
    run directory is read by preflight's bucket check, not here."""
    done = [] if str(run_dir).startswith("gs:") else committed_steps(run_dir)
    start = done[-1] + 1 if done else 0
    more = steps_beyond_checkpoint
    if more is not None:
        if "steps" in args.overrides:
            raise UsageError(
                "steps_beyond_checkpoint",
                "was given together with steps=",
                "keep one: steps= (a total) or --steps_beyond_checkpoint (more)",
            )
        if more < 1:
            raise UsageError(
                "steps_beyond_checkpoint",
                f"must be at least 1, got {more}",
                "--steps_beyond_checkpoint=20",
            )
        args = args.with_defaults(steps=start + more)
    steps = int(args.get("steps"))
    if done and 0 < steps <= start:  # steps=-1: MaxText takes the schedule's length
        raise UsageError(
            "steps",
            f"run {args.get('run_name')} already completed {start} steps (checkpoint "
            f"{done[-1]} in {run_dir / CHECKPOINTS_SUBDIR}); steps={steps} asks for no more",
            f"pass steps={start + steps} (or --steps_beyond_checkpoint=N) to train further, or "
            "a new run_name to start over",
        )
    return args
