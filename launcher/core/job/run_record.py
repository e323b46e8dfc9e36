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

from launcher.core.errors import UsageError
from launcher.core.job.checkpoints import committed_steps
from launcher.core.job.run_dir import RUN_RECORD, RunDir
from launcher.core.maxtext.args import MaxTextArgs, resolve_config
from launcher.core.maxtext.model_imports import (
    IMPORT_RECORD,
    PARAMS_ITEMS,
    import_dir,
    resolve_import,
)


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


IMPORT_PREFIX = "import:"  # `--run import:NAME`, where an import and a run share a name


@dataclass(frozen=True)
class RunCheckpoint:
    """A committed checkpoint of a run, or an import's parameters, and the model that reads it."""

    run: str
    run_dir: RunDir
    step: int
    model: MaxTextArgs  # the run's arguments with the user's on top; no full-state restore
    imported: Path | None = None  # an import's parameter tree: then it is no run's checkpoint

    @property
    def items_dir(self) -> Path:
        """Orbax's tree: a run's training state (parameters, optimizer state, step), or the
        import's parameters."""
        return self.imported or self.run_dir.checkpoint(self.step) / "items"

    def describe(self) -> str:
        if self.imported is not None:
            return f"import {self.run} ({self.imported.parent})"
        return f"run {self.run}, checkpoint step {self.step} ({self.run_dir.checkpoint(self.step)})"


def find_run_checkpoint(
    run: str,
    step: int | None,
    maxtext_argv: list[str],
    output_dir: str,
    imports: bool = False,
) -> RunCheckpoint:
    """The run's latest committed checkpoint (or `step`) under the output directory (or the
    base_output_directory= the user gives); with `imports`, an import of that name where no run
    has it (or `import:NAME`). Raises UsageError."""
    given = MaxTextArgs.parse(maxtext_argv).overrides if maxtext_argv else {}
    root = Path(given.get("base_output_directory", output_dir))
    name = run.removeprefix(IMPORT_PREFIX)
    is_import = (Path(import_dir(str(root), name)) / IMPORT_RECORD).is_file()
    only_an_import = is_import and not committed_steps(root / run)
    if imports and (run.startswith(IMPORT_PREFIX) or only_an_import):
        return _import_checkpoint(name, step, maxtext_argv, root)
    run_dir = RunDir(root / run)
    steps = committed_steps(run_dir.path)
    if not steps:
        also = ""
        if is_import:
            also = (
                f"; {run!r} is an import: generate from it with --run {IMPORT_PREFIX}{run}"
                if imports
                else f"; {run!r} is an import, a Hugging Face model already"
            )
        raise UsageError(
            "--run",
            f"run {run!r} has no committed checkpoint in {run_dir.checkpoints}{also}",
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


def _import_checkpoint(
    name: str, step: int | None, maxtext_argv: list[str], root: Path
) -> RunCheckpoint:
    """An import's parameters and the model `--from NAME` builds around them: MaxText's
    base.yml (or the config the user gives first) with the import's shape and tokenizer."""
    if step not in (None, 0):
        raise UsageError(
            "--step", f"import {name!r} has one checkpoint, no steps", "leave --step out"
        )
    argv = maxtext_argv or []
    if argv and argv[0].endswith((".yml", ".yaml")) and "=" not in argv[0]:
        base = MaxTextArgs.parse(argv)
    else:
        base = MaxTextArgs(resolve_config("base.yml"), MaxTextArgs.parse(argv).overrides)
    # One request: base.yml's 12 a device would hold a decode slot (its KV cache) for 12 each.
    base = base.with_defaults(run_name=name, per_device_batch_size=1)
    model, _ = resolve_import(base, name, str(root))
    kept = {k: v for k, v in model.overrides.items() if k != "load_parameters_path"}
    kept["base_output_directory"] = str(root)
    items = Path(import_dir(str(root), name)) / PARAMS_ITEMS
    run_dir = RunDir(Path(import_dir(str(root), name)))
    return RunCheckpoint(name, run_dir, 0, MaxTextArgs(model.config, kept), imported=items)


def _model_args(run_dir: Path, run: str, argv: list[str]) -> MaxTextArgs:
    """The run's recorded arguments with the user's key=value on top; a config file given
    first replaces the record (a run trained elsewhere has none)."""
    if argv and argv[0].endswith((".yml", ".yaml")) and "=" not in argv[0]:
        return MaxTextArgs.parse(argv).with_defaults(run_name=run)
    recorded = read_run_record(run_dir)
    extra = MaxTextArgs.parse(argv).overrides if argv else {}
    return MaxTextArgs(recorded.config, {**recorded.overrides, **extra})
