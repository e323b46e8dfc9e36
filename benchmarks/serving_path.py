#!/usr/bin/env python3
"""From a trained run to text and to a servable model: `tpu-launcher generate` and `export`, timed.

On the local Ray cluster (`tpu-launcher up`: the simulated v5p-16 slice), a tiny run is trained
(--steps), then generated from twice (the second finds the prefill and generate programs in
the run's compilation cache) and exported, each through the same commands a user runs.
Printed: each command's wall time from this side (submission to exit), the job's own split
(parameters, prefill, tokens), and the ratio against the target: `generate` within 180 s
on 2 cores.

    .venv/bin/python benchmarks/serving_path.py [--steps 10] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from harness.local_ray import (
    LocalCluster,
    launcher_result,
    require_local_cluster,
    run_name,
)

TARGET_SECONDS = 180.0  # `generate` after `tpu-launcher demo`, 2 cores


def timed(what: str, call) -> tuple[float, dict]:
    started = time.monotonic()
    code, out = call()
    seconds = time.monotonic() - started
    if code:
        raise SystemExit(f"{what} failed ({code}):\n{out[-4000:]}")
    return seconds, launcher_result(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    require_local_cluster()
    with tempfile.TemporaryDirectory(prefix="serving-") as bucket:
        cluster = LocalCluster(Path(bucket), started_here=False)
        name = run_name("serving")
        train_s, _ = timed(
            "train",
            lambda: cluster.submit("tiny-llama.yml", f"run_name={name}", f"steps={args.steps}"),
        )
        print(f"\ntrained {name}: {args.steps} steps in {train_s:.0f}s (not part of the target)")
        ask = ("--prompt", "hello", "--max-tokens", str(args.max_tokens))
        print(f"{'command':26}{'wall':>8}{'params':>9}{'prefill':>9}{'tokens':>9}{'ms/token':>10}")
        walls = []
        for label in ("generate (cold cache)", "generate (cached)"):
            wall, r = timed(label, lambda: cluster.about_run("generate", name, *ask))
            walls.append(wall)
            per_token = 1000 * r["generate_seconds"] / max(1, len(r["token_ids"]) - 1)
            print(
                f"{label:26}{wall:>7.0f}s{r['load_seconds']:>8.1f}s{r['prefill_seconds']:>8.1f}s"
                f"{r['generate_seconds']:>8.1f}s{per_token:>10.0f}"
            )
        wall, r = timed("export", lambda: cluster.about_run("export", name))
        print(
            f"{'export':26}{wall:>7.0f}s  ({r['parameters']:,} parameters, "
            f"{r['seconds']}s converting)"
        )
    worst = max(walls)
    print(
        f"\ngenerate / target: {worst:.0f}s / {TARGET_SECONDS:.0f}s = "
        f"{worst / TARGET_SECONDS:.2f} {'ok' if worst <= TARGET_SECONDS else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
