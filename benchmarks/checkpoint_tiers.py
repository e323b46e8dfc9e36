#!/usr/bin/env python3
"""The memory checkpoint tier against the bucket's, measured side by side in one run: what the
saves block of training, at the same save frequency.

On the local Ray cluster as two simulated v5p-8 slices (a cluster of another shape is restarted
as two, in the same bucket directory, and given its shape back after), two jobs of the demo's
model, each in a fresh output directory: one saving to the bucket every PERIOD steps, one on
the memory tier saving to memory every PERIOD steps and to the bucket every BUCKET_EVERY x
PERIOD. Printed per job: its saves per tier and the seconds they blocked training (the step
after a save beyond a steady step: goodput's "checkpoint saves that blocked", from the job's
summary), that part's share of the wall time; then the ratio memory / bucket of the blocked
seconds per save (target: below 1).

The local cluster's "bucket" is a directory on this machine's disk and the hosts' memory is
/dev/shm: the ratio says what the tier's mechanics save here (the first slice writes nothing at
a memory step, the second writes to a tmpfs), not what gcsfuse against host memory saves on a
TPU slice (preflight's estimate assumes those rates).

    .venv/bin/python benchmarks/checkpoint_tiers.py [--steps 60] [--period 2]
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.local_ray import LocalCluster, launcher_result, local_cluster_command, run_name
from launcher.client.local.cluster import running_bucket, running_slices

SHAPE = ("--tpu", "v5p-8", "--num-slices", "2")
BUCKET_EVERY = 10  # the memory tier's bucket period, in memory periods


@contextmanager
def two_slices() -> Iterator[None]:
    """The running local cluster as two slices for the benchmark, its own shape after."""
    if local_cluster_command("local", "status", check=False).returncode:
        raise SystemExit("start the local cluster first: tpu-launcher up")
    if running_slices() >= 2:
        yield
        return
    bucket = str(running_bucket() or ".local/bucket")
    print(f"checkpoint tiers: restarting the local cluster as {' '.join(SHAPE)}", flush=True)
    local_cluster_command("down")
    local_cluster_command("up", "--bucket-dir", bucket, *SHAPE)
    try:
        yield
    finally:
        local_cluster_command("down")
        local_cluster_command("up", "--bucket-dir", bucket)


def train(tier: str, steps: int, period: int, model: list[str]) -> dict:
    keys = [*model, f"checkpoint_period={period}"]
    if tier == "memory":
        keys = [*model, f"checkpoint_period={period * BUCKET_EVERY}"]
        keys.append(f"local_checkpoint_period={period}")
    with tempfile.TemporaryDirectory(prefix=f"tiers-{tier}-") as out_dir:
        cluster = LocalCluster(Path(out_dir), started_here=False)
        code, out = cluster.submit(
            "--tpu=v5p-8", "--num_slices=2", f"--checkpoint_tier={tier}", "tiny-llama.yml",
            f"run_name={run_name(tier)}", f"steps={steps}", *keys,
        )  # fmt: skip
        if code:
            raise SystemExit(f"the {tier} job failed:\n{out[-3000:]}")
        return launcher_result(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--period", type=int, default=2, help="steps between saves (default 2)")
    parser.add_argument(
        "--emb",
        type=int,
        default=64,
        help="the model's width (tiny-llama.yml's 64: a 1.4 MB checkpoint; 512 with --layers 4: "
        "about 200 MB, where the write weighs more than the save's fixed cost)",
    )
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    model = [
        f"base_emb_dim={args.emb}",
        f"base_mlp_dim={2 * args.emb}",
        f"base_num_decoder_layers={args.layers}",
    ]
    per_save = {}
    with two_slices():
        print(
            f"checkpoint tiers: tiny-llama.yml ({' '.join(model)}), {args.steps} steps on two "
            "simulated v5p-8 "
            f"slices, a save every {args.period} steps (the memory tier's to the bucket every "
            f"{args.period * BUCKET_EVERY})",
            flush=True,
        )
        print(f"{'job':9}{'tier':9}{'saves':>7}{'blocked':>10}{'a save':>9}{'of wall':>9}")
        for job in ("bucket", "memory"):
            result = train(job, args.steps, args.period, model)
            wall = result["goodput"]["wall_seconds"]
            for tier, saves in sorted(result["saves"].items()):
                n, blocked = saves["saves"], saves["blocked_seconds"]
                print(
                    f"{job:9}{tier:9}{n:7d}{blocked:9.2f}s{blocked / n:8.3f}s{blocked / wall:9.1%}",
                    flush=True,
                )
            blocked = result["goodput"]["parts"]["checkpoint"]
            print(f"{job:9}{'all':9}{'':7}{blocked:9.2f}s{'':9}{blocked / wall:9.1%}", flush=True)
            tier = result["saves"]["memory" if job == "memory" else "bucket"]
            per_save[job] = tier["blocked_seconds"] / tier["saves"]
    ratio = per_save["memory"] / per_save["bucket"] if per_save["bucket"] else float("inf")
    print(
        f"blocked per save, memory / bucket: {ratio:.2f} (target below 1: "
        f"{'met' if ratio < 1 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
