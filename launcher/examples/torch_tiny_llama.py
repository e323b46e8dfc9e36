"""A tiny Llama (transformers' architecture, random weights) trained with FSDP2 on every chip of
a PyTorch job, on the launcher's own corpus (launcher/corpus/tiny, UTF-8 bytes as tokens):

    tpu-launcher submit --framework torch -- --run_name=my-run torch_tiny_llama.py --steps 30

Each worker holds one chip (one process per chip, PyTorch's device-centric mode) and its shard
of the model; each step every worker trains on its own batch, and the loss reported is the mean
over all of them. A save every --save-every steps (and at the last) is committed only once every
worker's shards are written; a restarted or resubmitted run goes on from the latest one.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from transformers import LlamaConfig, LlamaForCausalLM

import launcher.corpus
from launcher.runtime.torch_job import TorchJob

CORPUS = Path(launcher.corpus.__file__).parent / "tiny"  # the installed launcher's


def corpus() -> torch.Tensor:
    text = "\n".join(
        json.loads(line)["text"]
        for path in sorted(CORPUS.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    )
    return torch.tensor(list(text.encode()), dtype=torch.long)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=30, help="steps in the whole run")
    p.add_argument("--more", type=int, help="instead: this many steps past the latest save")
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--batch", type=int, default=4, help="sequences per worker and step")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    args = p.parse_args()

    job = TorchJob.start(total_steps=args.steps)
    print(
        f"worker {job.rank} of {job.world_size}: local rank {job.local_rank}, chip {job.chip}, "
        f"device {job.device}",
        flush=True,
    )
    torch.manual_seed(0)  # the same initial weights on every worker
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=args.seq,
    )
    model = LlamaForCausalLM(config)
    model.to(job.device)  # type: ignore[arg-type]  # transformers types .to for dtypes
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    tokens = corpus()
    first = job.restore(model, optimizer)
    steps = first + args.more if args.more else args.steps
    job.set_total_steps(steps)
    for step in range(first, steps):
        # Each worker's own batch, the same whichever start computes the step.
        g = torch.Generator().manual_seed(step * job.world_size + job.rank)
        starts = torch.randint(0, len(tokens) - args.seq, (args.batch,), generator=g)
        batch = torch.stack([tokens[s : s + args.seq] for s in starts]).to(job.device)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        job.step_done(step, mean.item() / job.world_size, tokens=batch.numel() * job.world_size)
        if (step + 1) % args.save_every == 0 or step == steps - 1:
            job.save(step, model, optimizer)


if __name__ == "__main__":
    main()
