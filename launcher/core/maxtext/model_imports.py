"""An imported model, named in one place: what `tpu-launcher import` writes under
`<output dir>/imports/<name>/`, and what a job's `--from NAME` turns into MaxText's own keys.

    <output dir>/imports/<name>/
      tpu-launcher-import.json   what was imported, and the MaxText keys of its shape
      0/items/                   MaxText's parameter checkpoint: what load_parameters_path names
      tokenizer/                 the model's own tokenizer files, as Hugging Face saved them

The directory is written beside its final name and renamed last: an import that exists is whole.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from launcher.core.errors import UsageError
from launcher.core.maxtext.args import MaxTextArgs

IMPORTS_SUBDIR = "imports"
IMPORT_RECORD = "tpu-launcher-import.json"
PARAMS_ITEMS = "0/items"  # MaxText's converters save the parameters as step 0
TOKENIZER_SUBDIR = "tokenizer"

# A name is a directory in the bucket and part of load_parameters_path: the dataset rule.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

# A model on the Hugging Face Hub, as its own file system names it (HfFileSystem's hf://).
HUB_PREFIX = "hf://"
HUB_DIR = "hf"  # where the job downloads it in the bucket: hf/ORG/NAME
# The Hub's repo id rule, as huggingface_hub checks it (utils/_validators.py, validate_repo_id):
# an optional namespace and a name of letters, digits, '-', '_', '.', each 1-96 characters,
# neither starting nor ending with '-' or '.', no '--' or '..'.
_HUB_PART = r"[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?"
_HUB_REPO = re.compile(rf"^(?:{_HUB_PART}/)?{_HUB_PART}$", re.ASCII)
# A branch, a tag or a commit: git's ref characters, no spaces or shell metacharacters.
_HUB_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")


@dataclass(frozen=True)
class HubModel:
    repo: str  # ORG/NAME
    revision: str  # a branch, tag or commit; "main" unless given

    @property
    def bucket_dir(self) -> str:
        """Where the job downloads it, relative to the bucket."""
        return f"{HUB_DIR}/{self.repo}"


def hub_model(source: str) -> HubModel | None:
    """hf://ORG/NAME[@REVISION] -> the Hub model; None for a directory. Raises UsageError."""
    if not source.startswith(HUB_PREFIX):
        return None
    repo, _, revision = source[len(HUB_PREFIX) :].partition("@")
    if not _HUB_REPO.match(repo) or "--" in repo or ".." in repo:
        raise UsageError(
            "SOURCE",
            f"{repo!r} is not a Hugging Face repo id (ORG/NAME: letters, digits, '-', '_', '.', "
            "at most 96 each, not starting or ending with '-' or '.')",
            "e.g. hf://meta-llama/Llama-3.1-8B, as the model's page on huggingface.co names it",
        )
    if revision and not _HUB_REVISION.match(revision):
        raise UsageError(
            "SOURCE",
            f"{revision!r} is not a branch, tag or commit",
            f"e.g. {HUB_PREFIX}{repo}@main, or the commit the model's page lists",
        )
    return HubModel(repo, revision or "main")


def check_import_name(name: str, field: str = "--name") -> None:
    if not _NAME.match(name):
        raise UsageError(
            field,
            f"{name!r} is not an import name (letters, digits, '.', '_', '-'; at most 100; "
            "first a letter or digit)",
            "e.g. --name llama-3.1-8b",
        )


@dataclass(frozen=True)
class ImportRecord:
    name: str
    source: str  # the Hugging Face directory as the job read it, or the Hub's ORG/NAME
    architecture: str  # config.json's, e.g. LlamaForCausalLM
    model: dict[str, str]  # MaxText's keys for this shape: what `--from` adds to a job
    parameters: int
    dtype: str
    seconds: float
    revision: str = ""  # the Hub's commit, for a model downloaded from it

    def describe(self) -> str:
        return (
            f"starts from import {self.name}: {self.parameters:,} parameters of "
            f"{self.architecture} ({self.dtype}) from {self.source}"
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ImportRecord:
        return cls(**json.loads(text))


def import_dir(output_dir: str, name: str) -> str:
    # Joined as text: in the cluster it is the bucket's mount, from a workstation it may be gs://.
    return f"{output_dir.rstrip('/')}/{IMPORTS_SUBDIR}/{name}"


def read_import(directory: Path, name: str) -> ImportRecord:
    """The record of a finished import; a UsageError names what is there instead, and the fix."""
    path = directory / IMPORT_RECORD
    if not path.is_file():
        others = sorted(p.name for p in directory.parent.glob("*") if (p / IMPORT_RECORD).is_file())
        raise UsageError(
            "--from",
            f"no import {name!r} at {directory}"
            + (f" (imports there: {', '.join(others)})" if others else ""),
            f"run `tpu-launcher import SOURCE --name {name}` first",
        )
    try:
        return ImportRecord.from_json(path.read_text())
    except (ValueError, TypeError) as e:
        raise UsageError(
            "--from",
            f"{path} is not a record this launcher wrote ({e})",
            f"import it again: tpu-launcher import SOURCE --name {name}",
        ) from None


def resolve_import(
    args: MaxTextArgs, name: str, root: str, read_from: str | None = None
) -> tuple[MaxTextArgs, ImportRecord]:
    """--from NAME -> the import's shape, parameters and tokenizer as MaxText's own keys, under
    `root` (the hosts' view of the bucket; the record is read under `read_from`, a file system,
    when this process sees the bucket there). A shape key the user set must agree: the
    parameters have that shape and no other."""
    check_import_name(name, "--from")
    local = import_dir(read_from or root, name)
    record = read_import(Path(local), name)
    for key, value in record.model.items():
        if key in args.overrides and str(args.get(key)).lower() != value.lower():
            raise UsageError(
                key,
                f"{key}={args.get(key)} contradicts --from={name}, whose parameters have "
                f"{key}={value}",
                f"drop {key}= (--from sets it), or import a model of that shape",
            )
    directory = import_dir(root, name)
    return args.with_defaults(
        **record.model,
        load_parameters_path=f"{directory}/{PARAMS_ITEMS}",
        tokenizer_type="huggingface",
        tokenizer_path=f"{directory}/{TOKENIZER_SUBDIR}",
    ), record
