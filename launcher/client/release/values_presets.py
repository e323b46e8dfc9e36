"""The values presets (one file per topology or use, values/ in a clone) as every command reads
`-f/--values`: a path, or a preset's name (`v6e-16`), resolved once at the edge (cli.py) so
helm, preflight and submit all read the same files in the same order. The presets travel inside
the installed package (launcher/values, pyproject.toml's force-include)."""

from __future__ import annotations

import argparse
import difflib
import os
from pathlib import Path

import launcher
from launcher.core.errors import UsageError

SUFFIX = ".yaml"


def presets_dir() -> Path | None:
    """The installed package's presets, or a clone's values/ when run from the clone."""
    package = Path(launcher.__file__).resolve().parent
    for directory in (package / "values", package.parent / "values"):
        if (directory / f"cpu{SUFFIX}").is_file():
            return directory
    return None


def preset_names() -> list[str]:
    directory = presets_dir()
    return sorted(p.stem for p in directory.glob(f"*{SUFFIX}")) if directory else []


def resolve_values(word: str) -> str:
    """A file as named, where one is; else the preset of that name (`v6e-16`, `v6e-16.yaml`);
    else a UsageError naming the presets (the closest first)."""
    if Path(word).is_file():
        return word
    name = word.removesuffix(SUFFIX)
    directory, names = presets_dir(), preset_names()
    if directory is not None and "/" not in name and name in names:
        preset = (directory / f"{name}{SUFFIX}").resolve()
        # Relative where it can be, so a printed command runs from the same directory.
        return os.path.relpath(preset) if Path.cwd() in preset.parents else str(preset)
    close = difflib.get_close_matches(Path(name).name, names, n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    problem = f"no values file {word}" + (
        "" if "/" in word else " here, and no preset of that name"
    )
    if "/" in word and Path(name).name in names:
        hint = f"the preset of that name needs no path: --values {Path(name).name}. "
    fix = f"{hint}Name a file, or a preset: {', '.join(names) or '(none installed)'}"
    raise UsageError("--values", problem, fix)


def resolve_all(words: list[str]) -> list[str]:
    return [resolve_values(w) for w in words]


def add_values_option(parser: argparse._ActionsContainer, what: str) -> None:
    """-f/--values, the same for every command that reads the chart's values: repeated, in
    order (cli.py resolves each to a file once)."""
    parser.add_argument(
        "-f",
        "--values",
        action="append",
        default=[],
        help=f"{what}: chart values files, merged in order as helm merges them (repeat); each "
        f"a path or a preset's name ({', '.join(preset_names())})",
    )
