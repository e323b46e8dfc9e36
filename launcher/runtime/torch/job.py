"""What a PyTorch training script calls on every worker of a torch job.

    tpu-launcher submit --framework torch -- [job flags] train.py [its own arguments]

runs `train.py` once per chip of the job's slices (one Ray Train worker each, as `torchrun` runs
one process per device), with the process group already set up: `tpu_dist` on TPU, gloo on the
local cluster's simulated hosts. The script asks here where it runs, and hands its steps and
checkpoints to the launcher, which shows and counts them as it does a MaxText job's (the
`[progress]` and `[checkpoint]` lines, goodput, the summary):

    from launcher.runtime.torch.job import TorchJob

    job = TorchJob.start(total_steps=100)
    model = fully_shard(build_model().to(job.device))  # its chip, or the CPU standing in for it
    optimizer = torch.optim.AdamW(model.parameters())
    for step in range(job.restore(model, optimizer), 100):  # 0, or after the latest save
        loss = train_step(model, optimizer, batch)
        job.step_done(step, loss.item(), tokens=batch.numel())
        if step % 10 == 9 or step == 99:
            job.save(step, model, optimizer)

Checkpoints are torch.distributed.checkpoint's, every rank writing its shards into the run's
`checkpoints/<step>/` in the bucket, committed as MaxText's are (`commit_success.txt`, last, by
rank 0 once every rank's shards are written): one rule for which steps a run can resume from.
Each save is also reported to Ray Train (a pointer to the step), so its result and dashboard
list the run's checkpoints.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.core.job.checkpoints import COMMIT_MARKER, committed_steps
from launcher.core.job.run_dir import CHECKPOINTS_SUBDIR

if TYPE_CHECKING:
    import torch

    from launcher.runtime.train.preemption import NoticeRelay
    from launcher.runtime.train.progress import ProgressTracker

# Set by the torch entrypoint on every worker: the run's directory in the bucket.
RUN_DIR_ENV = "LAUNCHER_RUN_DIR"
# Ray sets it for a worker holding TPU chips (its TPU resource ids): the chip it may use.
VISIBLE_CHIPS_ENV = "TPU_VISIBLE_CHIPS"
# In the pointer checkpoint each save reports to Ray Train.
POINTER_FILE = "launcher_checkpoint.json"

# This worker's progress tracker and preemption relay, set by launcher.runtime.torch.worker
# around the script; None where the script runs on its own (torchrun, a test): the lines are
# printed then, and no notice comes.
_tracker: ProgressTracker | None = None
_relay: NoticeRelay | None = None
# Set by the relay when Ray tells this worker's host of its preemption.
_notice = threading.Event()


def simulated() -> bool:
    """A host whose devices are CPUs standing in for TPU chips (the local cluster)."""
    return os.environ.get("JAX_PLATFORMS", "").split(",")[0] == "cpu"


@dataclass
class TorchJob:
    """This worker's place in the job and the run it trains."""

    rank: int
    world_size: int
    local_rank: int
    chip: int | None  # the TPU chip this worker holds (None: none named)
    device: torch.device
    run_dir: Path
    total_steps: int
    _last_step_at: float = field(default_factory=time.monotonic)
    _saving_for_notice: bool = False

    @classmethod
    def start(cls, total_steps: int, run_dir: str | Path | None = None) -> TorchJob:
        """This worker, from what Ray Train and the launcher set (RANK, WORLD_SIZE,
        LOCAL_RANK, TPU_VISIBLE_CHIPS, LAUNCHER_RUN_DIR); `run_dir` where none is set."""
        import torch

        where = run_dir or os.environ.get(RUN_DIR_ENV)
        if not where:
            raise RuntimeError(
                f"{RUN_DIR_ENV} is not set and no run_dir was given: run the script with "
                "`tpu-launcher submit --framework torch -- script.py`, or pass run_dir="
            )
        chips = os.environ.get(VISIBLE_CHIPS_ENV, "")
        if simulated():
            device, backend = torch.device("cpu"), "gloo"
        else:
            try:
                import torch_tpu  # noqa: F401  (registers the "tpu" device)
            except ImportError as e:
                raise RuntimeError(
                    "this host's image has no TorchTPU (torch_tpu), which a PyTorch job on TPU "
                    "needs: install the chart with the torch image (image.framework=torch); on "
                    "a machine without TPUs, JAX_PLATFORMS=cpu runs the job on its CPU"
                ) from e
            device, backend = torch.device("tpu"), "tpu_dist"
        _join_process_group(backend)
        job = cls(
            rank=int(os.environ.get("RANK", "0")),
            world_size=int(os.environ.get("WORLD_SIZE", "1")),
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            chip=int(chips) if chips.isdigit() else None,
            device=device,
            run_dir=Path(where),
            total_steps=total_steps,
        )
        job.set_total_steps(total_steps)
        return job

    def set_total_steps(self, total_steps: int) -> None:
        """The run's length, for the progress lines' N/T and ETA (known after `restore` where
        the script trains a number of steps past the latest checkpoint)."""
        self.total_steps = total_steps
        if _tracker is not None:
            _tracker.total_steps = total_steps

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / CHECKPOINTS_SUBDIR

    def latest_step(self) -> int | None:
        """The run's latest committed step (None: none yet), read from the run's directory:
        the commit marker is the one truth. (Ray Train's own latest checkpoint, the pointers
        `save` reports, can trail it: a restart once got the save before the last.)"""
        done = committed_steps(self.run_dir)
        return done[-1] if done else None

    def restore(self, model: Any, optimizer: Any = None) -> int:
        """Loads the latest committed checkpoint into `model` (and `optimizer`), in place, on
        every rank; returns the step to go on from (0 when the run has none)."""
        step = self.latest_step()
        if step is None:
            return 0
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        model_state, optim_state = get_state_dict(model, optimizer or [])
        state: dict[str, Any] = {"model": model_state, "optim": optim_state}
        dcp.load(state, checkpoint_id=str(self.checkpoints / str(step)))
        set_state_dict(
            model,
            optimizer or [],
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
        )
        self._say(f"launcher: restoring from this run's directory step {step}")
        self._last_step_at = time.monotonic()
        return step + 1

    def save_due(self, step: int, every: int) -> bool:
        """Whether to save after `step`: every `every` steps and at the last, or now, when a
        host of the job heard of its preemption (every rank calls this after every step: they
        agree on the step, as JAX's preemption sync does for MaxText)."""
        import torch
        import torch.distributed as dist

        heard = _notice.is_set()
        if dist.is_initialized():
            flag = torch.tensor([1 if heard else 0], device=self.device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            heard = bool(flag.item())
        self._saving_for_notice = heard
        return heard or (step + 1) % every == 0 or step + 1 == self.total_steps

    def save(self, step: int, model: Any, optimizer: Any = None) -> None:
        """Every rank writes its shards of `step`; rank 0 commits it once all have, and each
        rank reports it to Ray Train (a barrier: every rank must call save at the same steps).
        A save for a preemption notice does not return: the worker waits for Ray Train to
        restart the group at the notice's deadline (a return would end the run)."""
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_state, optim_state = get_state_dict(model, optimizer or [])
        step_dir = self.checkpoints / str(step)
        dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(step_dir))
        if dist.is_initialized():
            dist.barrier()  # every rank's shards are written before the commit
        if self.rank == 0:
            (step_dir / COMMIT_MARKER).write_text(f"step {step}\n")
            if _tracker is not None:
                _tracker.checkpoint_done(step)
            else:
                self._say(f"[checkpoint] saved step {step}")
        if _in_ray_train():
            _report_to_ray_train(step, self.rank)
        self._last_step_at = time.monotonic()
        if self._saving_for_notice and _relay is not None and step + 1 < self.total_steps:
            from launcher.runtime.train.preemption import after_preemption_stop

            self._say(
                f"launcher: step {step} is committed on the preemption notice; this worker waits "
                "for Ray Train to restart the job at the notice's deadline"
            )
            after_preemption_stop(_relay, step)

    def step_done(self, step: int, loss: float, tokens: int) -> None:
        """Step `step` (from 0) is done on this worker, with this loss, on `tokens` tokens of
        the global batch: the launcher's progress line, goodput and metrics."""
        from launcher.runtime.train.progress import StepRecord

        now = time.monotonic()
        seconds, self._last_step_at = now - self._last_step_at, now
        record = StepRecord(
            step=step,
            seconds=seconds,
            tflops_per_device=0.0,
            tokens_per_device=tokens / self.world_size / seconds if seconds > 0 else 0.0,
            loss=loss,
            total_weights=float(tokens),
        )
        if _tracker is not None:
            _tracker.step_done(record)
        elif self.rank == 0:
            self._say(f"step {step}: loss {loss:.6f} ({seconds:.3f}s)")

    def _say(self, line: str) -> None:
        if self.rank == 0:
            if _tracker is not None:
                _tracker.say(line)
            else:
                print(line, flush=True)


def _join_process_group(backend: str) -> None:
    """Ray Train sets the group up before the script runs; run as `torchrun` runs it (RANK,
    WORLD_SIZE, MASTER_ADDR in the environment), the script joins it here."""
    import torch.distributed as dist

    if dist.is_available() and not dist.is_initialized() and "MASTER_ADDR" in os.environ:
        dist.init_process_group(backend)


def _in_ray_train() -> bool:
    try:
        import ray.train

        ray.train.get_context()
    except (ImportError, RuntimeError, AttributeError):
        return False
    return True


def _report_to_ray_train(step: int, rank: int) -> None:
    """A pointer to the committed step (rank 0's; the others report none), uploaded into Ray
    Train's run directory, where its checkpoint manager keeps it (the run's result lists it)."""
    import ray.train

    if rank != 0:
        ray.train.report({"step": step}, checkpoint=None)
        return
    with tempfile.TemporaryDirectory(prefix="launcher-pointer-") as d:
        (Path(d) / POINTER_FILE).write_text(json.dumps({"step": step}))
        ray.train.report({"step": step}, checkpoint=ray.train.Checkpoint.from_directory(d))
