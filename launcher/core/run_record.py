"""How a run was trained, kept in the run's directory next to its checkpoints, and the
checkpoint of a run that `generate` and `export` read.

`python -m launcher.runtime train` writes the record before the workers start; `generate` and
`export` read it to build the same model (config file and overrides) around a checkpoint, so
`RUN=demo` is all a user names. A run trained elsewhere has none: its MaxText arguments are given by
hand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from launcher.core.checkpoints import committed_steps
from launcher.core.errors import UsageError
from launcher.core.maxtext_args import MaxTextArgs
from launcher.core.run_dir import RUN_RECORD, RunDir


def write_run_record(run_dir: Path, args: MaxTextArgs) -> Path | None:
    """Records `args` in `run_dir` (None where the directory is no filesystem path: gs://)."""
    if str(run_dir).startswith("gs:"):
        return None
    run_dir.mkdir(parents=True, exist_ok=True)
    path = RunDir(run_dir).record
    record = {"config": str(args.config), "overrides": args.overrides}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(path)  # a reader never sees half a record
    return path


def read_run_record(run_dir: Path) -> MaxTextArgs:
    """The MaxText arguments `run_dir` was trained with. Raises UsageError."""
    path = RunDir(run_dir).record
    if not path.is_file():
        raise UsageError(
            "--run",
            f"{run_dir} has no {RUN_RECORD}: the run was not trained by this launcher's "
            "`train` (or before it kept one)",
            "give the MaxText config and model keys it was trained with after --, e.g. "
            "`tpu-launcher generate --run NAME -- tiny-llama.yml`",
        )
    record = json.loads(path.read_text())
    return MaxTextArgs(Path(record["config"]), dict(record["overrides"]))


@dataclass(frozen=True)
class RunCheckpoint:
    """A committed checkpoint of a run and the model that reads it."""

    run: str
    run_dir: RunDir
    step: int
    model: MaxTextArgs  # the run's arguments with the user's on top; no full-state restore

    @property
    def items_dir(self) -> Path:
        """Orbax's tree of the training state (parameters, optimizer state, step)."""
        return self.run_dir.checkpoint(self.step) / "items"


def find_run_checkpoint(
    run: str, step: int | None, maxtext_argv: list[str], output_dir: str
) -> RunCheckpoint:
    """The run's latest committed checkpoint (or `step`) under the output directory (or the
    base_output_directory= the user gives). Raises UsageError."""
    given = MaxTextArgs.parse(maxtext_argv).overrides if maxtext_argv else {}
    run_dir = RunDir(Path(given.get("base_output_directory", output_dir)) / run)
    steps = committed_steps(run_dir.path)
    if not steps:
        raise UsageError(
            "--run",
            f"run {run!r} has no committed checkpoint in {run_dir.checkpoints}",
            f"train it first (`tpu-launcher demo`, or `tpu-launcher submit -- ... "
            f"run_name={run}`), or name a run that has checkpoints",
        )
    chosen = steps[-1] if step is None else step
    if chosen not in steps:
        raise UsageError(
            "--step",
            f"run {run!r} has no committed checkpoint {chosen} (it has "
            f"{', '.join(map(str, steps))})",
            f"pick one of those, or leave --step out for the latest ({steps[-1]})",
        )
    model = _model_args(run_dir.path, run, maxtext_argv)
    # Parameters only: a full training state to restore would need the optimizer's too.
    kept = {k: v for k, v in model.overrides.items() if k != "load_full_state_path"}
    kept["base_output_directory"] = str(run_dir.path.parent)
    return RunCheckpoint(run, run_dir, chosen, MaxTextArgs(model.config, kept))


def _model_args(run_dir: Path, run: str, argv: list[str]) -> MaxTextArgs:
    """The run's recorded arguments with the user's key=value on top; a config file given
    first replaces the record (a run trained elsewhere has none)."""
    if argv and argv[0].endswith((".yml", ".yaml")) and "=" not in argv[0]:
        return MaxTextArgs.parse(argv).with_defaults(run_name=run)
    recorded = read_run_record(run_dir)
    extra = MaxTextArgs.parse(argv).overrides if argv else {}
    return MaxTextArgs(recorded.config, {**recorded.overrides, **extra})
