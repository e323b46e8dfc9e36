"""What a job's `--from` names: an import (`tpu-launcher import` wrote imports/NAME) or another
run's committed checkpoint (RUN, RUN@STEP), in the bucket the job writes to. Either way the job
loads only the parameters (MaxText's load_parameters_path; a new optimizer, step 0) and builds
the model they belong to: the import's shape keys, or the run's own model keys and config.

    --from=llama-8b          the import, or else the run, of that name
    --from=sft-1@400         run sft-1's checkpoint 400 (default: its latest committed)
    --from=import:NAME       one of the two, where an import and a run share a name
    --from=run:NAME[@STEP]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from launcher.core.errors import UsageError
from launcher.core.job.checkpoints import committed_steps
from launcher.core.job.run_dir import CHECKPOINTS_SUBDIR, RUN_RECORD, RunDir
from launcher.core.job.run_record import read_run_record
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.maxtext.model_imports import (
    IMPORT_RECORD,
    IMPORTS_SUBDIR,
    ImportRecord,
    import_dir,
    resolve_import,
)
from launcher.core.maxtext.model_shape import model_values, same_value, spelled

_FROM = re.compile(r"^(?:(import|run):)?([A-Za-z0-9][A-Za-z0-9._-]{0,99})(?:@(\d+))?$")


@dataclass(frozen=True)
class RunStart:
    """A job's start from another run's checkpoint."""

    run: str
    step: int
    items: str  # the checkpoint's Orbax tree, as the hosts see it
    model: MaxTextArgs  # the run's recorded arguments

    def describe(self) -> str:
        return (
            f"starts from run {self.run} at step {self.step}: its parameters ({self.items}), "
            f"its model ({self.model.config.name} and its model keys), a new optimizer at step 0"
        )


StartingPoint = ImportRecord | RunStart


def resolve_from(
    args: MaxTextArgs, given: str | None, root: str, read_from: str | None = None
) -> tuple[MaxTextArgs, StartingPoint | None]:
    """--from -> MaxText's keys for the job to start there, under `root` (the hosts' view of the
    bucket; records are read under `read_from` when this process sees the bucket there)."""
    if not given:
        return args, None
    match = _FROM.match(given)
    if match is None:
        raise UsageError(
            "--from",
            f"{given!r} names no import or run (NAME, NAME@STEP, import:NAME or run:NAME; a name "
            "is letters, digits, '.', '_', '-')",
            "e.g. --from=llama-3.1-8b (an import) or --from=sft-1@400 (a run's checkpoint)",
        )
    kind, name, step = match.groups()
    if "load_parameters_path" in args.overrides:
        raise UsageError(
            "load_parameters_path",
            f"is given together with --from={given}, which sets it",
            "keep one: --from (an import or a run, with its model) or load_parameters_path= "
            "(a checkpoint of your own, with its model keys)",
        )
    local = read_from or root
    if local.startswith("gs://"):
        raise UsageError(
            "--from",
            f"{local} is the bucket, not a file system this command can read",
            "run where the bucket is mounted (the job does), or give preflight --data-dir <the "
            "bucket's gcsfuse mount or a local copy>",
        )
    is_import = (Path(import_dir(local, name)) / IMPORT_RECORD).is_file()
    is_run = (Path(local) / name / RUN_RECORD).is_file()
    if kind is None and step is None and is_import and is_run:
        raise UsageError(
            "--from",
            f"{name!r} is both an import and a run in {local}",
            f"say which: --from=import:{name} or --from=run:{name}",
        )
    if kind is None and not is_import and not is_run:
        raise UsageError(
            "--from",
            f"no import or run named {name!r} in {local}" + _what_is_there(local),
            f"run `tpu-launcher import SOURCE --name {name}` first, or name a run trained there",
        )
    if kind == "run" or (kind is None and ((is_run and not is_import) or step is not None)):
        return _from_run(args, name, None if step is None else int(step), root, local)
    if step is not None:
        raise UsageError(
            "--from", f"{given!r}: an import has one checkpoint, no steps", f"--from={name}"
        )
    return resolve_import(args, name, root, read_from)


def _what_is_there(local: str) -> str:
    imports = sorted(p.parent.name for p in Path(local).glob(f"{IMPORTS_SUBDIR}/*/{IMPORT_RECORD}"))
    runs = sorted(p.parent.name for p in Path(local).glob(f"*/{RUN_RECORD}"))
    found = {"imports": imports, "runs": runs}
    there = [f"{kind}: {', '.join(names)}" for kind, names in found.items() if names]
    return f" ({'; '.join(there)})" if there else ""


def _from_run(
    args: MaxTextArgs, run: str, step: int | None, root: str, local: str
) -> tuple[MaxTextArgs, RunStart]:
    if str(args.get("run_name")) == run:
        raise UsageError(
            "--from",
            f"--from={run} is this job's own run_name",
            f"drop --from to resume {run} from its latest checkpoint (optimizer and data "
            "position included), or give the new run another run_name",
        )
    run_dir = RunDir(Path(local) / run)
    if not run_dir.record.is_file():
        raise UsageError(
            "--from",
            f"no run {run!r} with a {RUN_RECORD} in {local}",
            f"name a run this launcher trained there, or `tpu-launcher import` a model as {run}",
        )
    steps = committed_steps(run_dir.path)
    chosen = step if step is not None else (steps[-1] if steps else None)
    if chosen is None or chosen not in steps:
        has = f" {step} (it has {', '.join(map(str, steps)) or 'none'})" if step is not None else ""
        raise UsageError(
            "--from",
            f"run {run!r} has no committed checkpoint{has}",
            f"pick one of its steps (--from={run}@STEP), or train it first",
        )
    recorded = read_run_record(run_dir.path)
    args = carry_model(args, recorded, f"--from={run}")
    items = f"{root.rstrip('/')}/{run}/{CHECKPOINTS_SUBDIR}/{chosen}/items"
    start = RunStart(run, chosen, items, recorded)
    return args.with_defaults(load_parameters_path=items), start


def carry_model(args: MaxTextArgs, source: MaxTextArgs, said: str) -> MaxTextArgs:
    """`args` building `source`'s model: each model key whose value MaxText would compute
    differently is set to the source's (model_name first: its model file sets others); one the
    user set to another value is refused."""
    wanted = model_values(source)
    for group in (("model_name",), tuple(k for k in wanted if k != "model_name")):
        have = model_values(args)
        carried = {}
        for key in group:
            if same_value(have[key], wanted[key]) or wanted[key] is None:
                continue
            if key in args.overrides:
                raise UsageError(
                    key,
                    f"{key}={args.get(key)} contradicts {said}, whose parameters were trained "
                    f"with {key}={spelled(wanted[key])}",
                    f"drop {key}= ({said} sets it), or start from a model of that shape",
                )
            carried[key] = spelled(wanted[key])
        args = args.with_defaults(**carried)
    return args
