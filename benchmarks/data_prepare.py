#!/usr/bin/env python3
"""How fast `data prepare` goes per core: the workstation's path (one process) and the cluster's
(Ray Data tasks, launcher.runtime.data.prepare, on an in-process Ray with this machine's
cores), on the same generated corpus, measured side by side in one run; both datasets must
have the same checksum; the head's memory a document while it builds the index. Then the wall
time 100 GB would take on a v6e-16 release's hosts at the
Ray path's rate per core, with the CPUs the chart gives Ray (its values' requests: the head's,
and each TPU host's with --on-tpu-hosts) and with every vCPU of the TPU hosts
(launcher.core.tpu.machines).

    .venv/bin/python benchmarks/data_prepare.py [--mb 24] [--files 8] [--shard-mb 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

import yaml

from harness.paths import REPO

TARGET_GB = 100


def make_corpus(directory: Path, mb: float, files: int) -> int:
    """JSONL files of documents in the shipped corpus's words, 1% of them repeated;
    returns the bytes written."""
    from launcher.corpus.words import NUMBERS, THINGS, VERBS

    words = [*NUMBERS, *THINGS, *VERBS, "the", "a", "of", "and", "on", "every"]
    rng = random.Random(0)
    per_file = int(mb * 1e6 / files)
    total = 0
    for i in range(files):
        lines, size = [], 0
        while size < per_file:
            if lines and rng.random() < 0.01:
                line = rng.choice(lines)
            else:
                text = " ".join(rng.choices(words, k=rng.randint(50, 800)))
                line = json.dumps({"text": text})
            lines.append(line)
            size += len(line) + 1
        (directory / f"part-{i:03d}.jsonl").write_text("\n".join(lines) + "\n")
        total += size
    return total


def chart_cpus() -> tuple[int, int]:
    """The Ray CPUs of the chart's head and of each worker (their cpu requests: KubeRay's
    num-cpus when rayStartParams sets none)."""
    values = yaml.safe_load((REPO / "charts" / "tpu-stack" / "values.yaml").read_text())["ray"]
    head = int(values["head"]["resources"]["requests"]["cpu"])
    return head, int(values["worker"]["resources"]["requests"]["cpu"])


def index_bytes_per_document(documents: int = 2_000_000, files: int = 20) -> tuple[float, float]:
    """The cluster road's driver memory a document: its scans' rows, and what building the
    index adds at its peak (this process's maximum resident size before and after), on
    generated hashes, as many as a 4 GB corpus of 2 kB documents has."""
    import resource

    import numpy as np

    from launcher.core.data.shards import PrepareRequest
    from launcher.runtime.data.prepare import KEY_BYTES, Scan, build_index

    rng, per = np.random.default_rng(0), documents // files
    scans = [
        Scan(
            i,
            "",
            0,
            rng.integers(0, 256, (per, KEY_BYTES), dtype=np.uint8),
            rng.integers(0, 2, per).astype(np.int8),
            np.full(per, 2000, np.int64),
            np.zeros(per, bool),
            np.zeros((per, 0), np.uint64),
            np.arange(per, dtype=np.int64) * 2000,
        )
        for i in range(files)
    ]
    held = sum(
        s.keys.nbytes + s.splits.nbytes + s.sizes.nbytes + s.empty.nbytes + s.offsets.nbytes
        for s in scans
        if s.offsets is not None
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    build_index(scans, PrepareRequest("generated", "d", "nowhere"))
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024  # KiB on Linux
    return held / documents, peak / documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=24, help="corpus size, MB of JSONL")
    parser.add_argument("--files", type=int, default=8, help="files it is cut into")
    parser.add_argument(
        "--shard-mb",
        type=float,
        default=1.0,
        help="text per shard (a shard is a write task: 100 GB at the default 64 MB is 1,600)",
    )
    args = parser.parse_args()

    import ray

    from launcher.client.data.prepare import prepare
    from launcher.core.data.shards import PrepareRequest
    from launcher.core.tpu.machines import node_vcpus
    from launcher.core.tpu.table import tpu_type
    from launcher.runtime.data.prepare import prepare_on_ray

    cores = os.cpu_count() or 1
    held, peak = index_bytes_per_document()  # first: this process's peak is still low
    with tempfile.TemporaryDirectory(prefix="bench-prepare-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        size = make_corpus(src, args.mb, args.files)
        mb = size / 1e6

        here = {}
        for run in ("cold", "warm"):  # cold: this process's first import of the tokenizer's
            start = time.perf_counter()
            out = Path(tmp) / f"local-{run}"
            made = prepare(PrepareRequest(src, "d", out, shard_mb=args.shard_mb, progress=False))
            here[run] = (made, time.perf_counter() - start)
        local, local_s = here["warm"]

        ray.init(address="local", num_cpus=cores, include_dashboard=False, log_to_driver=False)
        runs = {}
        for run in ("cold", "warm"):  # cold: each task process imports the tokenizer's stack
            start = time.perf_counter()
            out = str(Path(tmp) / run)
            request = PrepareRequest(str(src), "d", out, shard_mb=args.shard_mb)
            runs[run] = (prepare_on_ray(request, cores), time.perf_counter() - start)
        ray.shutdown()
    on_ray, ray_s = runs["warm"]
    assert on_ray.checksum == local.checksum, "the two paths wrote different shards"
    ray_rate = mb / ray_s
    print(
        f"corpus: {mb:.1f} MB of JSONL in {args.files} files, {args.shard_mb:g} MB shards, "
        f"byte tokenizer; {cores} cores"
    )
    print(f"{'path':<40}{'wall s':>8}{'MB/s':>8}{'MB/s/core':>11}")
    for run, (_made, took) in here.items():
        label = f"workstation (1 process, {run})"
        print(f"{label:<40}{took:>8.1f}{mb / took:>8.2f}{mb / took:>11.2f}")
    for run, (made, took) in runs.items():
        assert made.checksum == local.checksum
        label = f"Ray Data ({cores} tasks at once, {run})"
        print(f"{label:<40}{took:>8.1f}{mb / took:>8.2f}{mb / took / cores:>11.2f}")
    print(
        f"speed-up, warm: {local_s / ray_s:.2f}x on {cores} cores; checksums equal. Cold: the "
        "same work and a process's first import of MaxText's tokenizer (torch, transformers), "
        "once per task process on a cluster"
    )

    per_doc = held + peak
    print(
        f"\nthe Ray road's driver (the head): {held:.0f} bytes a document of scans, "
        f"{peak:.0f} more at the index's peak: {per_doc * 50e6 / 1e9:.1f} GB for 50 million "
        f"documents ({TARGET_GB} GB of 2 kB documents)"
    )
    shape = tpu_type("v6e-16")
    head, worker = chart_cpus()
    per_core = ray_rate / cores * 1e6  # bytes/s
    print(f"\n{TARGET_GB} GB on a v6e-16 release ({shape.hosts} hosts, {shape.machine_type}) at")
    print(f"{ray_rate / cores:.2f} MB/s per core (the Ray path's, warm, measured above):")
    for what, n in (
        ("the head alone (its cpu request)", head),
        (f"head + {shape.hosts} TPU hosts, --on-tpu-hosts", head + shape.hosts * worker),
        (
            f"head + every vCPU of the TPU hosts ({node_vcpus(shape.machine_type)} each)",
            head + shape.hosts * node_vcpus(shape.machine_type),
        ),
    ):
        hours = TARGET_GB * 1e9 / (per_core * n) / 3600
        print(f"  {what:<58}{n:>5} cores{hours:>8.1f} h")


if __name__ == "__main__":
    main()
