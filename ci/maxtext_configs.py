#!/usr/bin/env python3
"""Writes the launcher's copy of the pinned MaxText's configs (every YAML config and the config
model, configs/types.py, kept as text) into launcher/core/maxtext/configs/, so a client with no
MaxText installed (any Python the package declares, any OS) checks a job's keys, kinds and model
as the image's MaxText will. The copy is MaxText's own files, Apache-2.0, unchanged.

ci/maxtext_configs.py --check  # exit 1 if the copy differs from the installed MaxText's
ci/maxtext_configs.py --write  # rewrite it from the installed MaxText (`make maxtext-configs`)
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

from launcher.core.maxtext.args import (
    MAXTEXT_COPY,
    MAXTEXT_COPY_VERSION,
    MAXTEXT_TYPES_COPY,
    pinned_maxtext,
)

KEPT = (".yml", ".yaml")


def installed_configs() -> Path:
    spec = importlib.util.find_spec("maxtext")
    assert spec and spec.submodule_search_locations, "maxtext is not installed: make venv"
    return Path(next(iter(spec.submodule_search_locations))) / "configs"


def wanted() -> dict[str, bytes]:
    """Relative path in the copy -> its bytes."""
    source = installed_configs()
    files = {
        p.relative_to(source).as_posix(): p.read_bytes()
        for p in sorted(source.rglob("*"))
        if p.is_file() and p.suffix in KEPT and "__pycache__" not in p.parts
    }
    files[MAXTEXT_TYPES_COPY] = (source / "types.py").read_bytes()
    files[MAXTEXT_COPY_VERSION] = f"maxtext=={pinned_maxtext()}\n".encode()
    return files


def present() -> dict[str, bytes]:
    if not MAXTEXT_COPY.is_dir():
        return {}
    return {
        p.relative_to(MAXTEXT_COPY).as_posix(): p.read_bytes()
        for p in sorted(MAXTEXT_COPY.rglob("*"))
        if p.is_file()
    }


def main(argv: list[str]) -> int:
    if argv != ["--check"] and argv != ["--write"]:
        print(__doc__, file=sys.stderr)
        return 2
    files = wanted()
    if argv == ["--check"]:
        have = present()
        stale = sorted(n for n in files.keys() | have.keys() if files.get(n) != have.get(n))
        if stale:
            print(
                f"{MAXTEXT_COPY} differs from the installed MaxText's configs "
                f"({len(stale)} files, e.g. {stale[0]}): run make maxtext-configs",
                file=sys.stderr,
            )
            return 1
        return 0
    shutil.rmtree(MAXTEXT_COPY, ignore_errors=True)
    for name, data in files.items():
        (MAXTEXT_COPY / name).parent.mkdir(parents=True, exist_ok=True)
        (MAXTEXT_COPY / name).write_bytes(data)
    print(f"wrote {len(files)} files to {MAXTEXT_COPY}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
