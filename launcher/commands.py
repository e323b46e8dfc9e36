"""Every external command (ray, kubectl, helm) goes through here: an argument list, never a
shell string; a named step; and a dry-run mode that prints instead of running."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


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
    """Runs `argv` for `step`; on failure exits with the step's name and the exit code."""
    argv = [_beside_interpreter(argv[0]), *argv[1:]]
    shown = shlex.join(argv)
    if dry_run:
        print(f"[dry-run] {step}: {shown}", flush=True)
        return subprocess.CompletedProcess(list(argv), 0, "", "")
    full_env = {**os.environ, **(env or {})}
    try:
        proc = subprocess.run(list(argv), env=full_env, text=True, capture_output=capture)
    except FileNotFoundError:
        print(f"error: {step}: `{argv[0]}` is not installed or not on PATH (run `make venv`)",
              file=sys.stderr)
        raise SystemExit(127) from None
    if check and proc.returncode != 0:
        if capture:
            sys.stderr.write(proc.stdout + proc.stderr)
        print(f"error: {step} failed (exit {proc.returncode}): {shown}", file=sys.stderr)
        raise SystemExit(proc.returncode)
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
        print(f"error: {step}: `{argv[0]}` is not installed or not on PATH", file=sys.stderr)
        raise SystemExit(127) from None
