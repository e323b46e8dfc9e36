"""A plain PyTorch DDP script as a team has it: written for `torchrun`, importing nothing of the
launcher. It reads torchrun's environment, makes its own process group, trains a linear model
to a fixed target and prints its loss from rank 0; with --ckpt-dir it saves its own
torch.distributed.checkpoint every 10 steps and resumes from the latest. The tests run it
unchanged under torchrun on one machine and as a `submit --framework torch` job on the simulated
v5p-16."""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--step-seconds", type=float, default=0.0)  # a longer run: time to kill a host
parser.add_argument("--ckpt-dir", default="")  # its own saves (every rank's shards), if given
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
latest = os.path.join(args.ckpt_dir, "latest") if args.ckpt_dir else ""
start = 0
if latest and os.path.exists(latest):
    with open(latest) as f:
        saved = int(f.read())
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=os.path.join(args.ckpt_dir, str(saved)))
    model.load_state_dict(state["model"])
    start = saved + 1
    if rank == 0:
        print(f"resumed from step {saved}", flush=True)
for step in range(start, args.steps):
    x = torch.randn(64, 16, generator=data)
    loss = torch.nn.functional.mse_loss(model(x), x @ target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    time.sleep(args.step_seconds)
    if rank == 0 and step % 5 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    if latest and step % 10 == 9:
        dcp.save(
            {"model": model.state_dict()}, checkpoint_id=os.path.join(args.ckpt_dir, str(step))
        )
        dist.barrier()  # every rank's shards written before the pointer moves
        if rank == 0:
            with open(latest + ".tmp", "w") as f:
                f.write(str(step))
            os.replace(latest + ".tmp", latest)
dist.destroy_process_group()
