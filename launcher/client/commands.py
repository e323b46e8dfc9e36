"""Every external command (ray, kubectl, helm) goes through here: an argument list, never a
shell string; a named step; and a dry-run mode that prints instead of running."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from launcher.core.errors import NOT_FOUND_EXIT_CODE, CommandError


def _beside_interpreter(program: str) -> str:
    """`ray` from this Python's environment, even when that environment is not activated."""
    if os.sep in program:
        return program
    sibling = Path(sys.executable).parent / program
    return str(sibling) if sibling.is_file() else program


def run(
    step: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    dry_run: bool = False,
    check: bool = True,
    capture: bool = False,
) -> subprocess.CompletedProcess:
    """Runs `argv` for `step`; raises CommandError (the step, the exit code, the captured
    output) when it fails and `check` is set."""
    argv = [_beside_interpreter(argv[0]), *argv[1:]]
    shown = shlex.join(argv)
    if dry_run:
        print(f"[dry-run] {step}: {shown}", flush=True)
        return subprocess.CompletedProcess(list(argv), 0, "", "")
    full_env = {**os.environ, **(env or {})}
    try:
        proc = subprocess.run(list(argv), env=full_env, text=True, capture_output=capture)
    except FileNotFoundError:
        raise CommandError(step, argv, NOT_FOUND_EXIT_CODE) from None
    if check and proc.returncode != 0:
        raise CommandError(
            step,
            argv,
            proc.returncode,
            (proc.stdout or "") + (proc.stderr or "") if capture else "",
        )
    return proc


def start(step: str, argv: Sequence[str], *, dry_run: bool = False) -> subprocess.Popen | None:
    """Starts a long-running helper (kubectl port-forward) for `step`; the caller stops it."""
    argv = [_beside_interpreter(argv[0]), *argv[1:]]
    if dry_run:
        print(f"[dry-run] {step}: {shlex.join(argv)}", flush=True)
        return None
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except FileNotFoundError:
        raise CommandError(step, argv, NOT_FOUND_EXIT_CODE) from None
