#!/usr/bin/env python3
"""Preflight of the seed's job (llama3-8b, v6e-16, fsdp 4 x tensor 4, seq 4096, batch 1/device):
time it cold (compiling) and cached, side by side, against the targets (<= 150 s, <= 1 s).

    .venv/bin/python benchmarks/preflight_timing.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED = ["base.yml", "dataset_type=synthetic", "per_device_batch_size=1",
        "max_target_length=4096", "model_name=llama3-8b", "steps=100", "ici_fsdp_parallelism=4",
        "ici_tensor_parallelism=4", "run_name=rayjob-8b-4096-tp4-4x4"]


def timed(*flags: str) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "launcher.preflight", *flags, "--values",
                           "values/v6e-16.yaml", "--", *SEED], cwd=REPO, capture_output=True,
                          text=True)
    if proc.returncode:
        raise SystemExit(proc.stdout + proc.stderr)
    return time.monotonic() - started, proc.stdout


def main() -> None:
    cold, report = timed("--no-cache")
    cached, _ = timed()
    print(report)
    print(f"\npreflight of the seed job: cold {cold:.1f} s (target <= 150 s: "
          f"{'ok' if cold <= 150 else 'MISSED'}), cached {cached:.2f} s (target <= 1 s: "
          f"{'ok' if cached <= 1 else 'MISSED'}), ratio {cold / cached:.0f}x")


if __name__ == "__main__":
    main()
