#!/usr/bin/env python3
"""A new run of the demo's shapes against a cold one: what the compilation cache shared by the
runs of an output directory saves, measured side by side in one run.

On the local Ray cluster (`tpu-launcher up`), each round takes a fresh output directory (so a
fresh `<output dir>/jax_cache`) and submits the demo's job there twice under two run names: the
first compiles every program (cold), the second is a new run that loads them from the cache the
first wrote. Printed per run: the programs loaded from the cache and the compile time that saved
(JAX's own measures, from the job's summary), the compile time left (JAX's), the seconds from
the worker group's start to its first step, and the summary's start-up timeline; then the median
ratios new / cold (target: the new run's compile time <= 0.5 of the cold one's, at least one
program loaded).

    .venv/bin/python benchmarks/compile_cache.py [--runs 2] [--steps 40]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.local_ray import (
    LocalCluster,
    launcher_result,
    require_local_cluster,
    run_name,
)

TARGET = 0.5  # the new run's compile seconds / the cold run's


@dataclass
class Start:
    programs_loaded: int
    saved_seconds: float
    compile_seconds: float
    to_first_step: float
    timeline: dict  # the summary's start-up parts (workers, restore, compile, other)


def train(cluster: LocalCluster, name: str, steps: int) -> Start:
    code, out = cluster.submit("tiny-llama.yml", f"run_name={name}", f"steps={steps}")
    if code:
        raise SystemExit(f"run {name} failed:\n{out[-3000:]}")
    result = launcher_result(out)
    cache = result["compile_cache"]
    return Start(
        cache["hits"],
        cache["saved_seconds"],
        cache["compile_seconds_per_start"][0],
        result["starts"][0]["seconds_to_first_step"],
        result["starts"][0]["timeline"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40, help="the demo's (default 40)")
    args = parser.parse_args()
    require_local_cluster()
    print(
        f"compile cache: tiny-llama.yml, {args.steps} steps on the local cluster's default "
        "slice; per round a fresh output directory, a cold run, then a new run of the same shapes",
        flush=True,
    )
    print(
        f"{'round':7}{'run':6}{'programs loaded':>17}{'saved':>9}{'compile':>10}"
        f"{'to first step':>15}   start-up: from the driver's start, workers up + restore + "
        "compile + the rest",
        flush=True,
    )
    compile_ratios, first_step_ratios = [], []
    for i in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="compile-cache-") as out_dir:
            cluster = LocalCluster(Path(out_dir), started_here=False)
            cold = train(cluster, run_name("cold"), args.steps)
            new = train(cluster, run_name("new"), args.steps)
        for label, start in (("cold", cold), ("new", new)):
            print(
                f"{i:<7}{label:6}{start.programs_loaded:>17}{start.saved_seconds:>8.1f}s"
                f"{start.compile_seconds:>9.1f}s{start.to_first_step:>14.1f}s   "
                + " + ".join(
                    f"{start.timeline[k]:.1f}" for k in ("workers", "restore", "compile", "other")
                )
                + f" = {start.timeline['total']:.1f}s",
                flush=True,
            )
        if new.programs_loaded < 1:
            raise SystemExit("the new run loaded no program from the shared cache")
        compile_ratios.append(new.compile_seconds / cold.compile_seconds)
        first_step_ratios.append(new.to_first_step / cold.to_first_step)
    ratio = statistics.median(compile_ratios)
    print(
        f"\nnew / cold, median of {args.runs}: compile {ratio:.2f} (target <= {TARGET}: "
        f"{'met' if ratio <= TARGET else 'NOT met'}), seconds to the first step "
        f"{statistics.median(first_step_ratios):.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
