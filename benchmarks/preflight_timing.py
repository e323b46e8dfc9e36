#!/usr/bin/env python3
"""Preflight of the GKE tutorial's job (llama3-8b, v6e-16, fsdp 4 x tensor 4, seq 4096,
batch 1/device):
time it cold (compiling) and cached, side by side, against the targets (<= 150 s, <= 1 s), and
the sharding advice for the same job from an empty cache and cached (targets <= 10 min, <= 5 s),
with its recommendation against the tutorial's measured 3725 tokens/s/chip (target >= 2x) and
its MFU against the 44-50% Google publishes for v6e.

    .venv/bin/python benchmarks/preflight_timing.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time

from harness.paths import REPO
from harness.tutorial import TUTORIAL_JOB_ARGS
from launcher.preflight.calibration import load_runs

TUTORIAL_JOB = ["base.yml", *TUTORIAL_JOB_ARGS]
TUTORIAL = next(r for r in load_runs() if r.name == "gke-tutorial-llama3-8b")
MEASURED = TUTORIAL.measured["tokens_per_chip_s"]  # its job log: 3725.218


def timed(*flags: str, cache_dir: str | None = None) -> tuple[float, str]:
    env = {**os.environ, **({"LAUNCHER_CACHE_DIR": cache_dir} if cache_dir else {})}
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "launcher",
            "preflight",
            *flags,
            "--values",
            "values/v6e-16.yaml",
            "--",
            *TUTORIAL_JOB,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode:
        raise SystemExit(proc.stdout + proc.stderr)
    return time.monotonic() - started, proc.stdout


def main() -> None:
    cold, report = timed("--no-cache")
    cached, _ = timed()
    print(report)
    with tempfile.TemporaryDirectory() as empty:
        advice_s, advice = timed("--advise", cache_dir=empty)
        advice_cached_s, _ = timed("--advise", cache_dir=empty)
    print(advice[advice.index("sharding advice") :])
    recommended = re.search(r"recommended: .*?([\d,]+) tokens/s/chip.*MFU (\d+)%", advice)
    tokens = float(recommended[1].replace(",", "")) if recommended else 0.0
    mfu = int(recommended[2]) if recommended else 0
    print(
        f"\npreflight of the GKE tutorial's job: cold {cold:.1f} s (target <= 150 s: "
        f"{'ok' if cold <= 150 else 'MISSED'}), cached {cached:.2f} s (target <= 1 s: "
        f"{'ok' if cached <= 1 else 'MISSED'}), ratio {cold / cached:.0f}x"
    )
    print(
        f"preflight + sharding advice from an empty cache: {advice_s / 60:.1f} min "
        f"(target <= 10 min: {'ok' if advice_s <= 600 else 'MISSED'}), cached "
        f"{advice_cached_s:.2f} s (target <= 5 s: {'ok' if advice_cached_s <= 5 else 'MISSED'}); "
        f"{len(re.findall(r'compiles: compiled ', advice))} candidates compiled"
    )
    ratio = tokens / MEASURED
    print(
        f"recommended: {tokens:,.0f} tokens/s/chip predicted, {ratio:.2f}x the tutorial's "
        f"measured {MEASURED:,.0f} (target >= 2x: {'ok' if ratio >= 2 else 'MISSED'}); "
        f"MFU {mfu}% predicted against 44-50% published for v6e "
        f"({'within' if 44 <= mfu <= 50 else 'OUTSIDE: docs/preflight.md says why'})"
    )


if __name__ == "__main__":
    main()
