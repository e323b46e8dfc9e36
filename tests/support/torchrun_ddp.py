"""A plain PyTorch DDP script as a team has it: written for `torchrun`, importing nothing of the
launcher. It reads torchrun's environment, makes its own process group, trains a linear model
to a fixed target and prints its loss from rank 0. The tests run it unchanged under torchrun on
one machine and as a `submit --framework torch` job on the simulated v5p-16."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--step-seconds", type=float, default=0.0)  # a longer run: time to kill a host
args = parser.parse_args()

dist.init_process_group(backend="gloo")
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
node = os.environ.get("NODE_RANK", "?")  # torchrun sets it with --nnodes; Ray Train always
master = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
where = f"local rank {local_rank} of {local_world}, node {node}"
print(f"rank {rank} of {world}: {where}, master {master}")
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
target = torch.randn(16, 1, generator=torch.Generator().manual_seed(7))
data = torch.Generator().manual_seed(1234 + rank)  # each rank its own batches
for step in range(args.steps):
    x = torch.randn(64, 16, generator=data)
    loss = torch.nn.functional.mse_loss(model(x), x @ target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    time.sleep(args.step_seconds)
    if rank == 0 and step % 5 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
