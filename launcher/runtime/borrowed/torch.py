"""What the runtime patches in PyTorch: read from torch 2.15.0 (the torch extra pins it). The
torchrun contract (launcher.runtime.torch.contract) takes a script's own process-group calls:
Ray Train has made the group before the script runs, and ends it after."""

from __future__ import annotations

from launcher.runtime.borrowed import Borrowed

DIST = "torch.distributed"
C10D = "torch.distributed.distributed_c10d"
GROUP_CALLS = ("init_process_group", "destroy_process_group")

# Both names of each: torch.distributed re-exports c10d's, and a script may call either.
PATCHED = frozenset((module, name) for module in (DIST, C10D) for name in GROUP_CALLS)

TORCH = Borrowed(
    "torch",
    "2.15.0",
    {key: "replaced while the script runs: the group is Ray Train's" for key in PATCHED},
    PATCHED,
)
