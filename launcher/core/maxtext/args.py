"""MaxText's argv, parsed and checked but never rewritten: `[config.yml] key=value ...`.

The launcher passes every key through unchanged. It only resolves the config file to an absolute
path (so every host reads the same file), adds defaults for keys the user left out, and checks
what it can before any TPU-hour is spent.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from launcher.core.errors import UsageError
from launcher.core.maxtext.value_types import number_of, typed, value_kinds

LAUNCHER_CONFIGS_DIR = Path(__file__).parents[2] / "configs"
# Prefixes under which MaxText's docs and GKE's tutorials name its configs.
_CONFIG_PREFIXES = (
    "src/maxtext/configs/",
    "src/MaxText/configs/",
    "maxtext/configs/",
    "MaxText/configs/",
    "configs/",
)
_PARALLELISM = re.compile(r"^(ici|dcn)_(\w+)_parallelism$")
REQUIRED_KEYS = {
    "run_name": "add run_name=<name>; a later run with the same name resumes from its latest "
    "checkpoint",
}

# Keys whose MaxText type (a plain int or float) lets through a value no job can mean: refused
# here with the key, not after the slice is up.
# key -> (what it counts, the values at or below zero it gives a meaning: base.yml's own).
MUST_BE_POSITIVE: dict[str, tuple[str, tuple[float, ...]]] = {
    "steps": ("the number of training steps", (-1,)),  # -1: learning_rate_schedule_steps'
    "per_device_batch_size": ("a batch", ()),
    "max_target_length": ("a sequence length", ()),
    "checkpoint_period": ("steps between checkpoints", ()),
    "gradient_accumulation_steps": ("steps of accumulation", ()),
}

# The chart refuses the same in ray.job.args (templates/validate.yaml).
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


@cache
def pinned_maxtext() -> str:
    """The MaxText version this package pins (its preflight extra), read from the installed
    package's metadata: pyproject.toml says it once."""
    from importlib.metadata import PackageNotFoundError, requires

    from launcher.core.package_version import DISTRIBUTION

    try:
        found = requires(DISTRIBUTION) or []
    except PackageNotFoundError:
        found = []
    for requirement in found:
        if m := re.match(r"maxtext(?:\[[^\]]*\])?\s*==\s*([\w.]+)", requirement):
            return m[1]
    return "<the version pyproject.toml pins>"


# The pinned MaxText's configs as the launcher ships them (ci/maxtext_configs.py writes the copy
# from the installed MaxText; `make verify` holds it to that): a client without MaxText, on any
# Python or OS, checks a job as the image's MaxText will. types.py is kept as text (never run).
MAXTEXT_COPY = Path(__file__).parent / "configs"
MAXTEXT_TYPES_COPY = "types.py.txt"
MAXTEXT_COPY_VERSION = "VERSION"


def maxtext_configs_dir() -> Path:
    """The installed MaxText's configs directory, found without importing jax; without MaxText
    installed, the launcher's copy of the pinned MaxText's."""
    import importlib.util

    spec = importlib.util.find_spec("maxtext")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))) / "configs"
    if (MAXTEXT_COPY / "base.yml").is_file():
        return MAXTEXT_COPY
    raise UsageError(
        field="maxtext",
        problem="the maxtext package is not installed in this Python environment, and this "
        f"launcher has no copy of its configs ({MAXTEXT_COPY})",
        fix="reinstall the launcher (its package carries them), or `pip install --no-deps "
        f"maxtext=={pinned_maxtext()}` (pure Python, Python 3.12+)",
    )


def maxtext_types_file() -> Path:
    """MaxText's config model (configs/types.py), the installed one's or the copy's."""
    configs = maxtext_configs_dir()
    return configs / (MAXTEXT_TYPES_COPY if configs == MAXTEXT_COPY else "types.py")


def resolve_config(name: str | None) -> Path:
    """Finds a config by path, by MaxText-relative path, or by name in MaxText's or our configs."""
    if not name:
        return maxtext_configs_dir() / "base.yml"
    path = Path(name)
    if path.is_file():
        return path.resolve()
    candidates = [maxtext_configs_dir() / name, LAUNCHER_CONFIGS_DIR / name]
    for prefix in _CONFIG_PREFIXES:
        if name.startswith(prefix):
            candidates.append(maxtext_configs_dir() / name[len(prefix) :])
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise UsageError(
        field="config",
        problem=f"MaxText config {name!r} not found (looked in the working directory, "
        f"{maxtext_configs_dir()} and {LAUNCHER_CONFIGS_DIR})",
        fix="give an existing .yml path, or a name such as base.yml or models/llama3-8b.yml",
    )


@cache
def _load_yaml(path: Path) -> dict[str, Any]:
    with open(path) as f:
        return yaml.safe_load(f) or {}


def config_files(path: Path) -> list[Path]:
    """The config and its `base_config` parents, child first, resolved as MaxText does
    (beside the child, else in MaxText's configs directory)."""
    files = [path]
    while parent := _load_yaml(files[-1]).get("base_config"):
        parent_path = files[-1].parent / parent
        files.append(parent_path if parent_path.is_file() else maxtext_configs_dir() / parent)
    return files


def load_config_chain(path: Path) -> dict[str, Any]:
    """The config with its `base_config` parents merged under it, as MaxText loads it."""
    cfg: dict[str, Any] = {}
    for file in reversed(config_files(path)):
        cfg.update(_load_yaml(file))
    return cfg


@dataclass
class MaxTextArgs:
    config: Path
    overrides: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, args: list[str]) -> MaxTextArgs:
        """Parses `[config.yml] key=value ...` (no program name)."""
        config_name = None
        overrides: dict[str, str] = {}
        for i, arg in enumerate(args):
            if CONTROL_CHARACTER.search(arg):
                raise UsageError(
                    field=arg,
                    problem="holds a control character (a newline, a tab): pasted by mistake, "
                    "and never part of a MaxText value",
                    fix="remove it; a value with spaces is fine as one quoted argument",
                )
            if i == 0 and arg.endswith((".yml", ".yaml")) and "=" not in arg:
                config_name = arg
                continue
            key, sep, value = arg.partition("=")
            if not sep or not key:
                raise UsageError(
                    field=arg,
                    problem="MaxText arguments must be key=value (only the first may be a .yml "
                    "config)",
                    fix=f"write it as key=value, e.g. steps=100; the config file goes first: "
                    f"{arg} base_output_directory=...",
                )
            if key in overrides:
                raise UsageError(
                    field=key,
                    problem=f"set twice ({key}={overrides[key]} and {arg})",
                    fix=f"keep one {key}=... argument",
                )
            overrides[key] = value
        args_obj = cls(resolve_config(config_name), overrides)
        args_obj.check_known_keys()
        args_obj.check_value_types()
        return args_obj

    @property
    def config_values(self) -> dict[str, Any]:
        return load_config_chain(self.config)

    def get(self, key: str) -> Any:
        if key in self.overrides:
            return typed(self.overrides[key])
        return self.config_values.get(key)

    def with_defaults(self, **defaults: object) -> MaxTextArgs:
        """Adds keys the user did not set on the command line; never changes one they did."""
        merged = dict(self.overrides)
        for key, value in defaults.items():
            merged.setdefault(key, str(value).lower() if isinstance(value, bool) else str(value))
        return MaxTextArgs(self.config, merged)

    def argv(self, prog: str = "train") -> list[str]:
        """The argv MaxText's train.main expects: program name, config, then key=value."""
        return [prog, str(self.config), *(f"{k}={v}" for k, v in self.overrides.items())]

    def check_known_keys(self) -> None:
        known = set(self.config_values)
        for key in self.overrides:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=3)
                hint = (
                    f"did you mean {' or '.join(close)}?"
                    if close
                    else (f"see the keys in {maxtext_configs_dir() / 'base.yml'}")
                )
                raise UsageError(
                    field=key,
                    problem=f"unknown MaxText config key {key!r}",
                    fix=hint,
                )

    def check_value_types(self) -> None:
        """A value of the wrong kind for its key (per_device_batch_size=abc, steps=1.5), as
        MaxText's own config model declares the key, is refused here with the key, not as a
        traceback on every host once the job starts."""
        types_py = maxtext_types_file()
        kinds = value_kinds(types_py) if types_py.is_file() else {}
        for key, raw in self.overrides.items():
            kind = kinds.get(key)
            if kind is None or kind.accepts(raw):
                continue
            if kind.choices:  # model_name=llama3-7b, dataset_type=hff
                close = difflib.get_close_matches(raw, kind.choices, n=3, cutoff=0.6)
                shown = ", ".join(kind.choices) if len(kind.choices) <= 12 else None
                raise UsageError(
                    field=key,
                    problem=f"{raw!r} is not one of the {len(kind.choices)} values MaxText's "
                    f"config model declares for {key} ({types_py})",
                    fix=(f"did you mean {key}={' or '.join(close)}? " if close else "")
                    + (f"one of: {shown}" if shown else f"see {key} in {types_py}"),
                )
            raise UsageError(
                field=key,
                problem=f"{raw!r} is not {kind.describe()}, as MaxText's config model declares it",
                fix=f"give {key}= {kind.describe()}",
            )
        for key, (what, meant) in MUST_BE_POSITIVE.items():
            number = number_of(self.overrides[key]) if key in self.overrides else None
            if number is not None and number <= 0 and number not in meant:
                also = "".join(f" (or {m:g}, as MaxText's base.yml says)" for m in meant)
                raise UsageError(
                    field=key,
                    problem=f"is {self.overrides[key]}: {what} cannot be zero or less",
                    fix=f"give {key}= a number above 0{also}",
                )

    def check_required(self) -> None:
        for key, fix in REQUIRED_KEYS.items():
            if not self.get(key):
                raise UsageError(field=key, problem="is required and was not given", fix=fix)

    def global_batch(self, devices: int) -> int:
        """Sequences per optimizer step on `devices` (MaxText's global_batch_size_to_train_on)."""
        per_device = float(self.get("per_device_batch_size"))
        accumulation = int(self.get("gradient_accumulation_steps") or 1)
        return max(1, round(per_device * devices * accumulation))

    def tokens_per_step(self, devices: int) -> int:
        """Token positions an optimizer step trains on (padding included)."""
        return self.global_batch(devices) * int(self.get("max_target_length"))

    def parallelism(self, kind: str) -> dict[str, int]:
        """The `<kind>_*_parallelism` values (kind: ici or dcn) in effect, -1 meaning 'fill'."""
        keys = {k for k in [*self.config_values, *self.overrides] if _PARALLELISM.match(k)}
        return {k: int(self.get(k)) for k in sorted(keys) if k.startswith(f"{kind}_")}

    def check_parallelism(self, devices_per_slice: int, num_slices: int, slice_desc: str) -> None:
        """ICI axes must multiply to the devices of one slice, DCN axes to the number of slices."""
        for kind, target, unit in (
            ("ici", devices_per_slice, f"devices per slice ({slice_desc})"),
            ("dcn", num_slices, "slices"),
        ):
            values = self.parallelism(kind)
            fills = [k for k, v in values.items() if v == -1]
            fixed = {k: v for k, v in values.items() if v != -1}
            product = 1
            for v in fixed.values():
                product *= v
            shown = " x ".join(f"{k}={v}" for k, v in fixed.items() if v != 1) or "1"
            if any(v < 1 for v in fixed.values()):
                bad = next(k for k, v in fixed.items() if v < 1)
                raise UsageError(
                    field=bad,
                    problem=f"must be a positive integer or -1, got {values[bad]}",
                    fix=f"set {bad}=1, or -1 to let MaxText fill it",
                )
            if len(fills) > 1:
                raise UsageError(
                    field=", ".join(fills),
                    problem=f"more than one {kind} axis is -1 (MaxText can fill only one)",
                    fix=f"keep -1 on one axis and set the others, e.g. {fills[1]}=1",
                )
            if fills and target % product == 0:
                continue
            if not fills and product == target:
                continue
            keys = [k for k, v in fixed.items() if v != 1] or [f"{kind}_fsdp_parallelism"]
            raise UsageError(
                field=", ".join(keys),
                problem=f"{kind} parallelism {shown} = {product}"
                f"{' (and a -1 axis)' if fills else ''} does not match the {target} {unit}",
                fix=f"make the {kind}_*_parallelism product {target}, e.g. "
                f"{kind}_fsdp_parallelism={target if kind == 'ici' else 1}"
                + (
                    " (or -1 on one axis to fill it)"
                    if kind == "ici"
                    else f" and {kind}_data_parallelism={target}"
                ),
            )


def check_output_directory(path: str) -> None:
    """The checkpoint root must exist and be writable before any worker starts."""
    if path.startswith("gs://"):
        return  # checked with the storage client by preflight; MaxText writes it directly
    if not os.path.isdir(path):
        raise UsageError(
            field="base_output_directory",
            problem=f"{path} does not exist",
            fix="mount the bucket there (chart value global.gcsfuse.bucketName) or pass "
            "base_output_directory=<an existing directory or gs://bucket/prefix>",
        )
    probe = Path(path) / f".launcher-write-probe-{os.getpid()}"
    try:
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise UsageError(
            field="base_output_directory",
            problem=f"{path} is not writable ({e.strerror})",
            fix="grant the job's service account roles/storage.objectUser on the bucket, or "
            "pass a writable base_output_directory=...",
        ) from None
