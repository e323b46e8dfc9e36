"""How a run was trained, kept in the run's directory next to its checkpoints.

`tpu-launcher train` writes it before the workers start; `tpu-launcher generate` reads it to
build the same model (config file and overrides) around a checkpoint, so `RUN=demo` is all a
user names. A run trained elsewhere has none: its MaxText arguments are given by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

from launcher.core.errors import UsageError
from launcher.core.maxtext_args import MaxTextArgs

RUN_RECORD = "tpu-launcher-run.json"


def write_run_record(run_dir: Path, args: MaxTextArgs) -> Path | None:
    """Records `args` in `run_dir` (None where the directory is no filesystem path: gs://)."""
    if str(run_dir).startswith("gs:"):
        return None
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RUN_RECORD
    record = {"config": str(args.config), "overrides": args.overrides}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(path)  # a reader never sees half a record
    return path


def read_run_record(run_dir: Path) -> MaxTextArgs:
    """The MaxText arguments `run_dir` was trained with. Raises UsageError."""
    path = run_dir / RUN_RECORD
    if not path.is_file():
        raise UsageError(
            "RUN",
            f"{run_dir} has no {RUN_RECORD}: the run was not trained by this launcher's "
            "`train` (or before it kept one)",
            "give the MaxText config and model keys it was trained with after --, e.g. "
            "`tpu-launcher generate --run NAME -- tiny-llama.yml`",
        )
    record = json.loads(path.read_text())
    return MaxTextArgs(Path(record["config"]), dict(record["overrides"]))
