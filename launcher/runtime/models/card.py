"""The model card (README.md) an export carries: what the model started from, what it was trained
on, how and how far, read from the run's own record and the records the launcher wrote beside it
(the import's, the dataset's manifest). Hugging Face's card format: YAML metadata, then text."""

from __future__ import annotations

import json
from pathlib import Path

from launcher.core.data.datasets import DATASETS_SUBDIR, MANIFEST, Manifest
from launcher.core.job.run_dir import CHECKPOINTS_SUBDIR, RunDir
from launcher.core.job.run_record import read_run_record
from launcher.core.job.trainers import is_sft
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.maxtext.model_imports import IMPORT_RECORD, IMPORTS_SUBDIR, ImportRecord

CARD = "README.md"


def _record_under(path: str, subdir: str, name: str) -> Path | None:
    """<root>/<subdir>/<name>/... -> that directory's record file, when it is there."""
    parts = Path(path).parts
    if subdir not in parts[:-1]:
        return None
    at = len(parts) - 1 - parts[::-1].index(subdir)
    record = Path(*parts[: at + 2]) / name
    return record if record.is_file() else None


def _base_import(args: MaxTextArgs) -> Path | None:
    """The record of the import a run's parameters began as, through the runs it started from
    (--from=RUN)."""
    loaded = Path(str(args.get("load_parameters_path") or ""))
    found = _record_under(str(loaded), IMPORTS_SUBDIR, IMPORT_RECORD)
    if found:
        return found
    if from_run(args) is not None and RunDir(loaded.parents[2]).record.is_file():
        return _base_import(read_run_record(loaded.parents[2]))
    return None


def base_model(args: MaxTextArgs) -> ImportRecord | None:
    """The import a run's parameters began as, through the runs it started from (--from=RUN)."""
    found = _base_import(args)
    return ImportRecord.from_json(found.read_text()) if found else None


def base_model_config(args: MaxTextArgs) -> dict | None:
    """That import's own config.json (the import keeps it beside its record), or None."""
    found = _base_import(args)
    config = found.parent / "config.json" if found else None
    return json.loads(config.read_text()) if config and config.is_file() else None


def from_run(args: MaxTextArgs) -> tuple[str, int] | None:
    """The run and step whose checkpoint `args` loads (<run>/checkpoints/<step>/items)."""
    parts = Path(str(args.get("load_parameters_path") or "")).parts
    if len(parts) > 3 and parts[-3] == CHECKPOINTS_SUBDIR and parts[-2].isdigit():
        return parts[-4], int(parts[-2])
    return None


def dataset(args: MaxTextArgs) -> Manifest | None:
    files = str(args.get("grain_train_files") or "")
    found = _record_under(files, DATASETS_SUBDIR, MANIFEST) if files else None
    return Manifest.from_json(found.read_text()) if found else None


def model_card(run: str, step: int, source: str, args: MaxTextArgs) -> str:
    base, data = base_model(args), dataset(args)
    sft = is_sft(args)
    meta = {"library_name": "transformers", "tags": ["maxtext", "tpu-launcher"]}
    if base is not None:
        meta["base_model"] = base.source
    lines = ["---", *(f"{k}: {json.dumps(v)}" for k, v in meta.items()), "---", ""]
    lines += [f"# {run}, step {step}", ""]
    trained = "Fine-tuned (SFT, the loss on completions)" if sft else "Trained"
    parent = from_run(args)
    if parent is not None:
        lines.append(f"{trained} from run `{parent[0]}` at step {parent[1]}, its parameters.")
    if base is not None:
        lines.append(
            f"{'Its base:' if parent else trained + ' from'} import `{base.name}`: "
            f"{base.parameters:,} parameters of {base.architecture} ({base.dtype}) from "
            f"`{base.source}`."
        )
    elif parent is None:
        lines.append(f"{trained} from MaxText's initialisation (no base model).")
    lines += ["", f"- trainer: MaxText's train loop{' with use_sft' if sft else ''}"]
    lines.append(f"- steps: {step} (checkpoint `{source}`)")
    if data is not None:
        lines.append(
            f"- data: dataset `{data.name}` (manifest checksum {data.checksum[:16]}): "
            f"{data.train.examples:,} training examples, {data.train.tokens:,} tokens, fields "
            f"{', '.join(data.fields)}, from `{data.source}` (sha256 {data.source_sha256[:16]})"
        )
    else:
        lines.append(f"- data: MaxText's dataset_type={args.get('dataset_type')}")
    lines.append(f"- MaxText config: `{args.config.name}` with " + " ".join(
        f"{k}={v}" for k, v in sorted(args.overrides.items())
    ))  # fmt: skip
    return "\n".join(lines) + "\n"
