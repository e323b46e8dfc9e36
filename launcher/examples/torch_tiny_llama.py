"""A tiny Llama trained with FSDP2 on every chip of a PyTorch job, on the launcher's own corpus
(launcher/corpus/tiny, UTF-8 bytes as tokens):

    tpu-launcher submit --framework torch -- --run_name=my-run torch_tiny_llama.py --steps 30

The model is Llama's architecture in plain PyTorch (RMSNorm, rotary positions, grouped-query
attention, SwiGLU), as TorchTitan's debug model is: any torch.nn.Module trains the same way,
a transformers model from `from_pretrained` included (whose import costs every process about
8 s of CPU, which 8 simulated chips on a 2-core machine pay at every start).

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
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import fully_shard

import launcher.corpus
from launcher.runtime.torch.job import TorchJob

CORPUS = Path(launcher.corpus.__file__).parent / "tiny"  # the installed launcher's


def corpus() -> torch.Tensor:
    text = "\n".join(
        json.loads(line)["text"]
        for path in sorted(CORPUS.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    )
    return torch.tensor(list(text.encode()), dtype=torch.long)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions: each half-pair of the head's channels turned by its position's angle."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.attention_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wkv = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.w1, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.wkv(h).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        repeat = self.heads // self.kv_heads  # grouped-query attention
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(attended.transpose(1, 2).reshape(b, t, -1))
        h = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class TinyLlama(nn.Module):
    def __init__(self, vocab=256, dim=64, layers=2, heads=4, kv_heads=2, hidden=128, seq=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, kv_heads, hidden) for _ in range(layers))
        self.norm, self.output = RMSNorm(dim), nn.Linear(dim, vocab, bias=False)
        head_dim = dim // heads
        freqs = 1.0 / 10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(seq).float(), freqs).repeat(1, 2)
        self.cos: torch.Tensor
        self.sin: torch.Tensor
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """The next-token cross-entropy over the sequences."""
        x = self.embed(tokens[:, :-1])
        t = x.shape[1]
        for layer in self.layers:
            x = layer(x, self.cos[:t], self.sin[:t])
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())


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
    model = TinyLlama(seq=args.seq + 1).to(job.device)
    for layer in model.layers:
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
        starts = torch.randint(0, len(tokens) - args.seq - 1, (args.batch,), generator=g)
        batch = torch.stack([tokens[s : s + args.seq + 1] for s in starts]).to(job.device)
        loss = model(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        job.step_done(
            step, mean.item() / job.world_size, tokens=args.batch * args.seq * job.world_size
        )
        if job.save_due(step, every=args.save_every):  # or now, on a preemption notice
            job.save(step, model, optimizer)


if __name__ == "__main__":
    main()
