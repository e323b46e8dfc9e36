#!/usr/bin/env python3
"""Recovery from a lost host, with and without the run's compilation cache, in one run.

On the local Ray cluster (`make up`: the simulated v5p-16 slice), the same tiny MaxText job
runs twice, once with JAX's persistent compilation cache in the run's directory (the
launcher's default) and once with it off (jax_cache_dir=""), in turn, --runs times. Each time
one host is killed at step --kill-at; printed: the seconds from the kill to the first step
after the restore, the restarted attempt's compile time (JAX's own measure) and the programs it
loaded from the cache, then the ratio against the target (with / without <= 0.60).

    .venv/bin/python benchmarks/recovery.py [--runs 1] [--kill-at 12]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.job_control import (  # noqa: E402
    jobs_client,
    kill_a_host,
    seconds_to_first_step_after_restore,
    submit_no_wait,
    wait_for_step,
    wait_until_done,
)
from tests.support.local_ray import (  # noqa: E402
    LocalCluster,
    launcher_result,
    require_local_cluster,
    run_name,
)

TARGET = 0.60  # recovery with the cache / without


@dataclass
class Recovery:
    seconds: float  # from the kill to the first step after the restore
    compile_seconds: float  # the restarted attempt's, JAX's own measure
    cache_hits: int  # programs the restarted attempt loaded from the cache


def recover(cluster: LocalCluster, cache: bool, steps: int, kill_at: int) -> Recovery:
    client, name = jobs_client(), run_name("recovery-cache" if cache else "recovery-nocache")
    job_id = f"{name}-job"
    job_args = ["tiny-llama.yml", f"run_name={name}", f"steps={steps}"]
    submit_no_wait(cluster, job_id, *job_args, *([] if cache else ["jax_cache_dir="]))
    wait_for_step(client, job_id, kill_at)
    offset = len(client.get_job_logs(job_id))
    killed_at = kill_a_host()
    seconds = seconds_to_first_step_after_restore(client, job_id, offset, killed_at)
    status = wait_until_done(client, job_id)
    if status != "SUCCEEDED":
        raise SystemExit(f"job {job_id} ended {status}: make logs JOB={job_id}")
    compiled = launcher_result(client.get_job_logs(job_id))["compile_cache"]
    return Recovery(
        seconds, compiled["compile_seconds_per_start"][-1], compiled["hits_per_start"][-1]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--kill-at", type=int, default=12)
    args = parser.parse_args()
    require_local_cluster()
    print(
        f"\nrecovery from a killed host: tiny-llama.yml, {args.steps} steps, one of the two "
        f"simulated hosts killed at step {args.kill_at}",
        flush=True,
    )
    print(
        f"{'run':5}{'cache':10}{'kill -> first step':>20}{'compile after restart':>23}"
        f"{'programs from cache':>21}",
        flush=True,
    )
    found: dict[bool, list[Recovery]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="recovery-") as bucket:
        cluster = LocalCluster(Path(bucket), started_here=False)
        for i in range(1, args.runs + 1):
            for cache in (False, True):
                r = recover(cluster, cache, args.steps, args.kill_at)
                found[cache].append(r)
                print(
                    f"{i:<5}{'on' if cache else 'off':10}{r.seconds:>19.1f}s"
                    f"{r.compile_seconds:>22.1f}s{r.cache_hits:>21}",
                    flush=True,
                )
    without, with_cache = (statistics.median(r.seconds for r in found[c]) for c in (False, True))
    ratio = with_cache / without
    print(
        f"\nrecovery with the cache / without: {with_cache:.1f}s / {without:.1f}s = {ratio:.2f} "
        f"(target <= {TARGET:.2f}) {'ok' if ratio <= TARGET else 'MISSED'}"
    )
    saved = statistics.median(r.compile_seconds for r in found[False]) - statistics.median(
        r.compile_seconds for r in found[True]
    )
    print(
        f"the cache takes {saved:.1f}s of compiling out of each restart here (the tiny "
        "model's); the rest of a recovery is Ray Train restarting the worker group and "
        "MaxText's start-up, which no cache removes"
    )


if __name__ == "__main__":
    main()
