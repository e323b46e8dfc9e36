#!/usr/bin/env python3
"""Would MaxText's Grain input pipeline keep a v6e-16 host fed? Its tokens/s per host on this
machine beside the tokens/s one host of the GKE tutorial's job consumes, in one run.

The pipeline is MaxText's own (make_grain_train_iterator: ArrayRecord shards, tokenizing as it
reads, packing, batching, device_put), on a dataset `tpu-launcher data prepare` wrote from the
project's corpus, with the tutorial's sequence length (4096) and a v6e host's share of its global
batch (4 chips x per_device_batch_size 1 = 4 sequences a step), one process standing for one
host. Tokenizers: MaxText's Llama 3 tiktoken (the tutorial's llama3-8b) and the UTF-8 byte one.
Grain workers: 0 (in the training process) and MaxText's default 1.

The TPU side is the tutorial's measured figure, not measured here: Tokens/s/device 3725.218 on
v6e-16 (seed 000: `completed step: 99, seconds: 1.100, ... Tokens/s/device: 3725.218`), x 4
chips a host = 14,901 tokens/s per host.

    .venv/bin/python benchmarks/input_pipeline.py [--batches 30] [--workers 0,1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from harness.paths import REPO

TUTORIAL_TOKENS_PER_DEVICE = 3725.218  # seed 000's v6e-16 step
CHIPS_PER_HOST = 4  # v6e-16: 4 hosts x 4 chips
HOST_NEEDS = TUTORIAL_TOKENS_PER_DEVICE * CHIPS_PER_HOST
SEQUENCE = 4096
ROWS_PER_HOST = 4


def pipeline_tokens_per_s(dataset: Path, workers: int, batches: int) -> float:
    """Tokens a second (the rows' capacity: what a step consumes) out of MaxText's iterator."""
    import jax
    from maxtext.configs import pyconfig
    from maxtext.input_pipeline.grain_data_processing import make_grain_train_iterator
    from maxtext.utils import maxtext_utils

    from launcher.core.data.datasets import Manifest, maxtext_keys

    manifest = Manifest.from_json((dataset / "manifest.json").read_text())
    keys = maxtext_keys(manifest, str(dataset))
    argv = [
        "bench",
        str(REPO / "launcher" / "configs" / "tiny-llama.yml"),
        "run_name=bench",
        f"base_output_directory={dataset.parent}",
        f"max_target_length={SEQUENCE}",
        f"per_device_batch_size={ROWS_PER_HOST}",
        f"vocab_size={max(manifest.vocab_size, 256)}",
        "num_epoch=1000",
        "enable_checkpointing=false",
        "skip_jax_distributed_system=true",
        f"grain_worker_count={workers}",
        *(f"{k}={v}" for k, v in keys.items() if k != "grain_eval_files"),
    ]
    config = pyconfig.initialize(argv)
    mesh = maxtext_utils.get_mesh_from_config(config)
    iterator = make_grain_train_iterator(config, mesh, [jax.process_index()])
    for _ in range(3):  # start-up: workers, the first reads, the tokenizer's caches
        next(iterator)
    started = time.perf_counter()
    for _ in range(batches):
        jax.block_until_ready(next(iterator))
    return batches * ROWS_PER_HOST * SEQUENCE / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=30, help="timed batches per case")
    parser.add_argument("--workers", default="0,1", help="grain_worker_count values to try")
    ns = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # Grain's own flags, at their defaults (as in the worker)
    from launcher.client.data.prepare import PrepareRequest, prepare
    from launcher.corpus import TINY as SHIPPED_CORPUS

    print(
        f"one v6e-16 host consumes {HOST_NEEDS:,.0f} tokens/s (the tutorial's "
        f"{TUTORIAL_TOKENS_PER_DEVICE} tokens/s/device x {CHIPS_PER_HOST} chips)"
    )
    print(f"{'tokenizer':<26} {'grain workers':>13} {'tokens/s':>12} {'x a host needs':>15}")
    rates: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, tokenizer in (
            ("llama3 tiktoken", "tokenizer_llama3.tiktoken"),
            ("UTF-8 bytes", "bytes"),
        ):
            name = tokenizer.split(".")[0].replace("_", "-")
            prepare(PrepareRequest(SHIPPED_CORPUS, name, Path(tmp), tokenizer, progress=False))
            for workers in (int(w) for w in ns.workers.split(",")):
                rate = pipeline_tokens_per_s(Path(tmp) / "datasets" / name, workers, ns.batches)
                rates[(label, workers)] = rate
                verdict = "keeps up" if rate >= HOST_NEEDS else "falls behind"
                print(
                    f"{label:<26} {workers:>13} {rate:>12,.0f} {rate / HOST_NEEDS:>14.2f}x "
                    f"{verdict}",
                    flush=True,
                )
            one = rates.get((label, 1))
            if one:
                print(
                    f"{label}: one Grain worker process gives {one:,.0f} tokens/s; a host needs "
                    f"{HOST_NEEDS / one:.2f} of them (grain_worker_count)",
                    flush=True,
                )
    print(f"(this machine: {os.cpu_count()} cores; a v6e host, ct6e-standard-4t, has 180 vCPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
