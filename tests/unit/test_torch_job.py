"""The PyTorch job's script side (launcher.runtime.torch.job) with real torch.distributed: the
shipped example (a tiny Llama in plain PyTorch, FSDP2) on two processes over gloo, as `torchrun`
starts them (no Ray: the e2e test runs it under Ray Train). Its checkpoints are DCP's, committed
by the one marker MaxText's use; a resumed run goes on from the latest and computes exactly the
losses an uninterrupted one does (weights, AdamW's moments and the data order all restored)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.client.jobs.torch_submit import EXAMPLE
from launcher.core.job.checkpoints import COMMIT_MARKER, committed_steps

pytestmark = [pytest.mark.unit, pytest.mark.timeout(300)]
WORKERS = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_example(run_dir: Path, *args: str) -> dict[int, float]:
    """The example on WORKERS processes; rank 0's loss per step."""
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(EXAMPLE), *args],
            env={
                **os.environ,
                "JAX_PLATFORMS": "cpu",  # the simulated host's mark: CPU devices, gloo
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(WORKERS),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
                "LAUNCHER_RUN_DIR": str(run_dir),
                "OMP_NUM_THREADS": "1",
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(WORKERS)
    ]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0, out[-4000:]
    assert f"worker 1 of {WORKERS}: local rank 1, chip None, device cpu" in outs[1], outs[1]
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^step (\d+): loss (\S+)", outs[0], re.M)}


def test_a_resumed_run_computes_the_losses_an_uninterrupted_one_does(tmp_path):
    straight = run_example(tmp_path / "straight", "--steps", "6", "--save-every", "3")
    assert sorted(straight) == list(range(6))
    assert straight[5] < straight[0], straight  # it learns
    assert committed_steps(tmp_path / "straight") == [2, 5]

    # The same run as a host killed while saving step 5 leaves it: no commit marker there.
    run = tmp_path / "cut"
    shutil.copytree(tmp_path / "straight", run)
    (run / "checkpoints" / "5" / COMMIT_MARKER).unlink()
    resumed = run_example(run, "--steps", "6", "--save-every", "3")
    assert sorted(resumed) == [3, 4, 5], "did not go on after the latest committed step (2)"
    assert committed_steps(run) == [2, 5]
    for step in (3, 4, 5):
        assert resumed[step] == pytest.approx(straight[step], abs=1e-6), (step, resumed, straight)
