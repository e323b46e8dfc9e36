"""The job's own files, shipped with it: a MaxText config of your own (and its local
`base_config` parents), or a whole directory (`submit --working-dir`), uploaded through Ray's
runtime_env `working_dir` as `ray job submit --working-dir` does. Ray unpacks it on every node
and runs the job there, so the cluster reads the copy sent at submission, not a path on your
machine or in the image. Configs that ship in the image (MaxText's, the launcher's) travel by
name and need nothing.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from launcher.client.workspace import WORKSPACE
from launcher.core.errors import UsageError
from launcher.core.maxtext.args import LAUNCHER_CONFIGS_DIR, config_files, maxtext_configs_dir

# Every host downloads the package at each job start, and Ray refuses packages past its gRPC
# message size (512 MiB): data and weights belong in the bucket, not here.
MAX_BYTES = 100 * 2**20
SKIPPED_DIRS = {".git", "__pycache__", ".venv", WORKSPACE, ".tools", "node_modules"}
SHOWN_FILES = 10


@dataclass(frozen=True)
class Shipment:
    """What travels with the job: `directory` becomes the job's working directory on every
    host (None: nothing to ship); `job_args` name the config as the cluster finds it there."""

    directory: Path | None
    files: list[tuple[str, int]]  # (path inside the directory, bytes)
    job_args: list[str]

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size in self.files)

    def describe(self) -> list[str]:
        if self.directory is None:
            return []
        lines = [
            f"ships with the job (its working directory on every host): {len(self.files)} "
            f"file{'s' if len(self.files) != 1 else ''}, {_size(self.total_bytes)} from "
            f"{self.directory}"
        ]
        lines += [f"  {path} ({_size(size)})" for path, size in self.files[:SHOWN_FILES]]
        if len(self.files) > SHOWN_FILES:
            lines.append(f"  ... and {len(self.files) - SHOWN_FILES} more")
        return lines


def _size(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} B"
    return f"{n / 1024:.1f} KiB" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def _in_image(path: Path) -> bool:
    """Configs the launcher image carries: MaxText's and the launcher's own."""
    return any(
        path.is_relative_to(d.resolve()) for d in (maxtext_configs_dir(), LAUNCHER_CONFIGS_DIR)
    )


def _listing(directory: Path) -> list[tuple[str, int]]:
    files = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(names):
            path = Path(root) / name
            if path.is_file():
                files.append((str(path.relative_to(directory)), path.stat().st_size))
    return files


def _check_size(files: list[tuple[str, int]], where: str) -> None:
    total = sum(size for _, size in files)
    if total > MAX_BYTES:
        largest = sorted(files, key=lambda f: -f[1])[:5]
        raise UsageError(
            "--working-dir",
            f"{where} holds {_size(total)} in {len(files)} files, more than the "
            f"{_size(MAX_BYTES)} a job ships to every host (largest: "
            + ", ".join(f"{p} {_size(s)}" for p, s in largest)
            + ")",
            "put data and weights in the bucket and read them from there, or point "
            "--working-dir at a directory with only the job's code and configs",
        )


def _with_config(job_args: list[str], maxtext_argv: list[str], name: str) -> list[str]:
    """The job's args with the config (MaxText's first argument) renamed."""
    at = len(job_args) - len(maxtext_argv)
    if job_args[at:] == maxtext_argv:
        return [*job_args[:at], name, *job_args[at + 1 :]]
    i = job_args.index(maxtext_argv[0])
    return [*job_args[:i], name, *job_args[i + 1 :]]


def plan_shipment(
    job_args: list[str],
    maxtext_argv: list[str],
    config: Path,
    working_dir: str | None,
    staging: Path,
) -> Shipment:
    """What to ship for a job whose MaxText config resolved to `config`. Without a working
    directory, local config files are copied into `staging` (kept by the caller until the
    upload is done); with one, every local config must lie inside it."""
    named = bool(maxtext_argv) and maxtext_argv[0].endswith((".yml", ".yaml"))
    local = [p.resolve() for p in config_files(config) if not _in_image(p.resolve())]
    if working_dir is not None:
        directory = Path(working_dir).resolve()
        if not directory.is_dir():
            raise UsageError(
                "--working-dir", f"{working_dir} is not a directory", "pass an existing directory"
            )
        outside = [p for p in local if not p.is_relative_to(directory)]
        if outside:
            raise UsageError(
                "--working-dir",
                f"the job's config {outside[0]} is outside {directory}, so the cluster would "
                "not have it",
                f"move it into {directory}, or pass the directory that holds it",
            )
        files = _listing(directory)
        _check_size(files, str(directory))
        args = job_args
        if named and local:
            args = _with_config(job_args, maxtext_argv, str(local[0].relative_to(directory)))
        return Shipment(directory, files, args)
    if not (named and local):
        return Shipment(None, [], job_args)
    home = local[0].parent
    outside = [p for p in local if not p.is_relative_to(home)]
    if outside:
        raise UsageError(
            "base_config",
            f"{local[0].name}'s base_config {outside[0]} is not in the config's directory, "
            "so it cannot ship beside it",
            "pass --working-dir <a directory that holds both>",
        )
    for path in local:
        dest = staging / path.relative_to(home)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    files = _listing(staging)
    _check_size(files, "the job's configs")
    return Shipment(staging, files, _with_config(job_args, maxtext_argv, local[0].name))


def ship_script(script: str, working_dir: str | None) -> Shipment:
    """What a PyTorch job ships: its working directory (--working-dir, else the current one),
    which must hold the script; `job_args` is the script's path inside it."""
    directory = Path(working_dir or ".").resolve()
    if not directory.is_dir():
        raise UsageError(
            "--working-dir", f"{working_dir} is not a directory", "pass an existing directory"
        )
    path = Path(script).resolve()
    if not path.is_file():
        inside = directory / script  # the slip: a path from the working directory
        raise UsageError(
            script,
            f"no file at {path}",
            f"name it by its path from here: {os.path.relpath(inside)}"
            if inside.is_file()
            else "name the training script by its path from here",
        )
    if not path.is_relative_to(directory):
        raise UsageError(
            script,
            f"is outside {directory}, which ships with the job, so the cluster would not have it",
            f"submit from the directory that holds it, or pass --working-dir {path.parent}",
        )
    files = _listing(directory)
    _check_size(files, str(directory))
    return Shipment(directory, files, [str(path.relative_to(directory))])
