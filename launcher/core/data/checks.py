"""A job's data, checked where its files are visible (the bucket's mount in the cluster, the
local bucket directory, or the directory preflight is given) before any host starts or any step
compiles: what MaxText would otherwise find minutes later on every host, or never (a job that
runs out of data stops early; an eval that needs more batches than the split holds hangs hosts
that ran out while others go on)."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from launcher.core.data.datasets import (
    EpochEstimate,
    Manifest,
    check_dataset_name,
    dataset_dir,
    epoch_estimate,
    maxtext_keys,
    read_manifest,
)
from launcher.core.data.tokenizers import load_tokenizer, resolve_tokenizer_path
from launcher.core.errors import UsageError
from launcher.core.maxtext.args import MaxTextArgs, maxtext_configs_dir

# MaxText reads these datasets through a tokenizer it loads from tokenizer_path.
_TOKENIZED = ("grain", "tfds", "hf", "c4_mlperf")
SECRET_FIX = (
    "never put a token in a job's arguments (they are logged and stored with the job): keep it "
    "in a Kubernetes Secret the release mounts (chart value ray.hfToken), which "
    "sets HF_TOKEN on every host"
)


@dataclass(frozen=True)
class DataPlan:
    """The job's data as the plan prints it."""

    name: str | None  # --data's name; None: MaxText's own keys
    directory: str | None
    manifest: Manifest | None
    train: EpochEstimate | None

    def describe(self) -> list[str]:
        if self.manifest is None:
            return []
        m, lines = self.manifest, []
        lines.append(
            f"data: {self.name} ({self.directory}): train {m.train.examples} examples, "
            f"{m.train.tokens} tokens in {len(m.train.shards)} shard(s); eval "
            f"{m.eval.examples} examples, {m.eval.tokens} tokens; tokenizer {m.tokenizer} "
            f"({m.tokenizer_type}, vocabulary {m.vocab_size})"
        )
        if self.train is not None:
            t = self.train
            way = (
                f"{t.rows} sequences x {t.row_tokens // max(t.rows, 1)} tokens packed"
                if t.packing
                else f"{t.rows} sequences, one example each"
            )
            cut = " (each example cut to max_target_length first)" if t.packing else ""
            lines.append(f"data: steps x global batch = {way}: up to {t.epochs:.3f} epochs{cut}")
        return lines


def model_value(args: MaxTextArgs, key: str) -> Any:
    """A key as MaxText sees it: the command line, else the model_name's own config
    (configs/models/<name>.yml, which MaxText lays over base.yml), else the config chain."""
    if key in args.overrides:
        return args.get(key)
    model = str(args.get("model_name") or "default")
    if model != "default":
        values = _model_config(model)
        if key in values:
            return values[key]
    return args.get(key)


@cache
def _model_config(model: str) -> dict[str, Any]:
    path = maxtext_configs_dir() / "models" / f"{model}.yml"
    if not path.is_file():
        return {}
    with open(path) as f:
        return yaml.safe_load(f) or {}


def resolve_data(
    args: MaxTextArgs, data: str | None, root: str, read_from: str | None = None
) -> tuple[MaxTextArgs, DataPlan]:
    """--data NAME -> MaxText's own keys for the dataset under `root` (the hosts' view of the
    bucket; its manifest is read under `read_from` when this process sees the bucket there).
    A key the user set on the command line is kept (and must agree)."""
    if not data:
        return args, DataPlan(None, None, None, None)
    check_dataset_name(data, "--data")
    directory = dataset_dir(root, data)
    local = dataset_dir(read_from or root, data)
    manifest = read_manifest(_path(local), f"--data={data} under {read_from or root}")
    keys = maxtext_keys(manifest, directory)
    for key in ("dataset_type", "grain_file_type"):
        if key in args.overrides and str(args.get(key)) != keys[key]:
            raise UsageError(
                field=key,
                problem=f"{key}={args.get(key)} contradicts --data={data} ({key}={keys[key]})",
                fix=f"drop {key}= (--data sets it), or drop --data and name the files yourself",
            )
    return args.with_defaults(**keys), DataPlan(data, directory, manifest, None)


def _path(directory: str) -> Path:
    if directory.startswith("gs://"):
        raise UsageError(
            field="--data",
            problem=f"{directory} is in the bucket, not on a file system this command can read",
            fix="run where the bucket is mounted (the job does, at /data), or give preflight "
            "--data-dir <the bucket's gcsfuse mount or a local copy>",
        )
    return Path(directory)


def check_elastic_data(args: MaxTextArgs, data: str | None, minimum: int, slices: int) -> None:
    """Grain's iterator state is one file per host, and MaxText restores it only onto as many
    hosts as saved it (maxtext/common/grain_utility.py: for_restore raises otherwise): a job
    that shrinks would fail every restart. Its ElasticIterator keeps one state for any number
    of hosts, without packing."""
    if not data and str(args.get("dataset_type")) != "grain":
        return
    if not args.get("grain_use_elastic_iterator"):
        raise UsageError(
            field="min_slices",
            problem=f"an elastic job (--min_slices={minimum} of {slices} slices) on Grain data "
            "cannot resume on fewer hosts: MaxText restores Grain's per-host iterator state "
            "only onto as many hosts as saved it",
            fix=f"--min_slices={slices} (every slice, always), or MaxText's elastic iterator: "
            "grain_use_elastic_iterator=true packing=false",
        )
    if args.get("packing"):
        raise UsageError(
            field="packing",
            problem="grain_use_elastic_iterator=true does not pack (MaxText's base.yml)",
            fix="add packing=false",
        )


def check_data(
    args: MaxTextArgs, plan: DataPlan, devices: int | None, view: tuple[str, str] | None = None
) -> DataPlan:
    """Refuses, with the key and the fix, what MaxText would fail on later; returns the plan
    with the epochs `steps` x the global batch mean (when the devices are known). `view`:
    (the bucket's path on the job's hosts, where it is seen here), when they differ (preflight
    --data-dir: /data on the hosts is that directory here)."""
    if str(args.get("hf_access_token") or ""):
        raise UsageError(field="hf_access_token", problem="a token in the job", fix=SECRET_FIX)
    kind = str(args.get("dataset_type"))
    if kind == "synthetic":
        return plan
    here = _seen_here(view)
    if kind == "grain":
        _check_grain_files(args, here)
    if kind in _TOKENIZED and _tokenizes(args):
        _check_tokenizer(args, plan, here)
    eval_on = int(args.get("eval_interval") or -1) > 0
    if eval_on and kind == "grain" and not str(args.get("grain_eval_files") or ""):
        raise UsageError(
            field="eval_interval",
            problem="eval_interval is set but the job has no eval files"
            + (
                f" (dataset {plan.name}'s eval split is empty)" if plan.manifest is not None else ""
            ),
            fix="prepare the data with --eval-fraction > 0, or set grain_eval_files=, or drop "
            "eval_interval=",
        )
    if plan.manifest is None or devices is None:
        return plan
    return _check_against_manifest(args, plan, devices, eval_on)


def _seen_here(view: tuple[str, str] | None) -> Callable[[str], str]:
    """A path as the job's hosts name it -> where this process reads it."""
    if view is None:
        return lambda path: path
    hosts, local = view[0].rstrip("/"), view[1].rstrip("/")
    return lambda path: local + path[len(hosts) :] if path.startswith(hosts + "/") else path


def _tokenizes(args: MaxTextArgs) -> bool:
    value = args.get("tokenize_train_data")
    return value is None or bool(value)


def _patterns(value: str) -> list[str]:
    """grain_train_files: `a*;b*` or `a*,0.3;b*,0.7` (MaxText's mixture syntax)."""
    return [part.split(",")[0].strip() for part in value.split(";") if part.strip()]


def _check_grain_files(args: MaxTextArgs, here: Callable[[str], str]) -> None:
    for key in ("grain_train_files", "grain_eval_files"):
        value = str(args.get(key) or "")
        if key == "grain_train_files" and not value:
            if args.get("grain_train_mixture_config_path") or args.get("hf_path"):
                continue
            raise UsageError(
                field=key,
                problem="dataset_type=grain names no training files",
                fix="pass --data NAME (a prepared dataset) or grain_train_files=<glob>",
            )
        for pattern in _patterns(value):
            if pattern.startswith(("gs://", "hf://")):
                continue  # read by MaxText with its own clients
            found = sorted(glob.glob(os.path.expanduser(here(pattern))))
            if not found:
                raise UsageError(
                    field=key,
                    problem=f"no file matches {pattern}",
                    fix="check the path as the job's hosts see it (the bucket is mounted at "
                    "/data), or prepare the data: tpu-launcher data prepare SOURCE --name NAME",
                )
            for path in found:
                try:
                    with open(path, "rb") as f:
                        f.read(1)
                except OSError as e:
                    raise UsageError(
                        field=key,
                        problem=f"{path} cannot be read ({e.strerror})",
                        fix="grant the job's service account read access to the bucket "
                        "(roles/storage.objectUser), or fix the file's permissions",
                    ) from None


# A tokenizer's defining file, where it has one: what two copies must share to count alike.
_DEFINING = ("tokenizer.json", "tokenizer.model")


def _tokenizer_bytes(path: Path) -> bytes | None:
    """The bytes that define the tokenizer at `path` (a file, or a directory: its defining
    file, else every file); None where this process cannot read it."""
    if path.is_file():
        return path.read_bytes()
    if not path.is_dir():
        return None
    for name in _DEFINING:
        if (path / name).is_file():
            return (path / name).read_bytes()
    return b"".join(
        p.relative_to(path).as_posix().encode() + b"\0" + p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    )


def _check_same_tokenizer(given: str, plan: DataPlan, here: Callable[[str], str]) -> None:
    """The job tokenizes with `given` (the model's, from --from, or tokenizer_path=) where the
    dataset's tokens were counted with its own: two tokenizers that differ mean other ids than
    the model was trained on, and a plan (tokens, epochs) of another tokenization."""
    manifest = plan.manifest
    assert manifest is not None
    own = f"{plan.directory}/{manifest.tokenizer_path}"
    theirs, ours = _tokenizer_bytes(Path(here(given))), _tokenizer_bytes(Path(here(own)))
    if theirs is None or ours is None or theirs == ours:
        return
    raise UsageError(
        field="--data",
        problem=f"dataset {plan.name} was tokenized with {manifest.tokenizer} but the job "
        f"tokenizes with {given} (the model's): its ids would mean other tokens to the model",
        fix=f"prepare the data again with the model's tokenizer (`tpu-launcher data prepare "
        f"SOURCE --name {plan.name}-2 --tokenizer <that tokenizer, as this machine sees it>`), "
        "or train the dataset's own tokenizer's model",
    )


def _check_tokenizer(args: MaxTextArgs, plan: DataPlan, here: Callable[[str], str]) -> None:
    given = str(args.get("tokenizer_path") or "")
    path = here(given)
    # The dataset's own tokenizer is counted in its manifest; another one is loaded, and must
    # be the same tokenizer.
    manifest = plan.manifest
    if manifest is not None and given != f"{plan.directory}/{manifest.tokenizer_path}":
        _check_same_tokenizer(given, plan, here)
        manifest = None
    if not path:
        raise UsageError(
            field="tokenizer_path",
            problem=f"dataset_type={args.get('dataset_type')} tokenizes text and no tokenizer "
            "is named",
            fix="pass --data NAME (its tokenizer comes with it) or tokenizer_path=",
        )
    resolved = resolve_tokenizer_path(path)
    if not resolved.startswith(("gs://", "hf://")) and not os.path.exists(resolved):
        hub_id = "/" in path and not path.startswith(("/", ".", "~"))
        if hub_id and args.get("tokenizer_type") == "huggingface":
            return  # a Hugging Face hub id: MaxText's hosts download it
        raise UsageError(
            field="tokenizer_path",
            problem=f"{path} does not exist (nor among MaxText's tokenizer assets)",
            fix="give the tokenizer as the job's hosts see it (a file, a Hugging Face "
            "directory, or a name such as tokenizer.llama2), or use --data NAME",
        )
    if manifest is not None:
        vocabulary, source = manifest.vocab_size, f"dataset {manifest.name}'s manifest"
    elif resolved.startswith(("gs://", "hf://")) or not os.path.exists(resolved):
        return
    else:
        loaded = load_tokenizer(
            resolved, str(args.get("tokenizer_type")), field="tokenizer_path", add_bos=False
        )
        vocabulary, source = loaded.vocab_size, resolved
    model_vocab = int(model_value(args, "vocab_size"))
    if vocabulary > model_vocab:
        raise UsageError(
            field="vocab_size",
            problem=f"the tokenizer has {vocabulary} tokens ({source}) but the model's "
            f"vocab_size is {model_vocab}: ids past it have no embedding",
            fix=f"use the model's own tokenizer, or a model with vocab_size >= {vocabulary}",
        )


def _check_against_manifest(
    args: MaxTextArgs, plan: DataPlan, devices: int, eval_on: bool
) -> DataPlan:
    m = plan.manifest
    assert m is not None
    global_batch = args.global_batch(devices)
    length = int(args.get("max_target_length"))
    packing = bool(args.get("packing"))
    steps = int(args.get("steps"))
    epochs_allowed = int(args.get("num_epoch") or 1)
    train = epoch_estimate(m.train, max(steps, 0), global_batch, length, packing)
    if train.surely_more_than > epochs_allowed:
        need = int(-(-train.surely_more_than // 1))
        raise UsageError(
            field="steps",
            problem=f"steps={steps} x global batch {global_batch} = {train.rows} sequences, but "
            f"dataset {m.name} has {m.train.examples} training examples (a sequence holds at "
            f"least one) and num_epoch={epochs_allowed}: MaxText runs out of data",
            fix=f"set num_epoch={need} (or more), fewer steps=, or more data",
        )
    eval_steps = int(args.get("eval_steps") or -1)
    if eval_on and eval_steps > 0:
        per_device = float(args.get("per_device_batch_size"))
        eval_per_device = float(args.get("eval_per_device_batch_size") or 0) or per_device
        eval_batch = max(1, round(eval_per_device * devices))
        if eval_steps * eval_batch > m.eval.examples:
            most = m.eval.examples // eval_batch
            raise UsageError(
                field="eval_steps",
                problem=f"eval_steps={eval_steps} x eval batch {eval_batch} = "
                f"{eval_steps * eval_batch} sequences, but dataset {m.name}'s eval split has "
                f"{m.eval.examples} examples: hosts run out mid-eval",
                fix=f"eval_steps={max(1, most)} or fewer, or prepare with a larger --eval-fraction",
            )
    return DataPlan(plan.name, plan.directory, m, train)
