"""The TorchTrainer entrypoint: a PyTorch script on every chip of the cluster's TPU slices.

    python -m launcher.runtime train-torch [--run_name=NAME] [JOB FLAGS] SCRIPT.py [ARGS]

One Ray Train worker per chip (PyTorch's device-centric mode), the process group set up before
the script runs (launcher.runtime.torch.backend), the script's steps and saves read through
launcher.runtime.torch.job, and the same summary, goodput, restarts and budgets, hang watchdog
and Ray metrics as a MaxText job's. What `tpu-launcher submit --framework torch` runs on the
cluster. The job flags are a MaxText job's policy flags (launcher.core.job.flags.POLICY_FLAGS).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, cast

from launcher.core.errors import UsageError, report
from launcher.core.job.frameworks import TORCH, check_image_runs
from launcher.core.job.run_dir import output_dir
from launcher.core.job.torch_plan import TorchJobSpec, TorchPlan
from launcher.core.job.torch_script import (
    PLAIN_SCRIPT_NOTE,
    SIMULATED_BACKEND,
    TPU_BACKEND,
    check_backends,
    uses_torch_job,
)
from launcher.core.release_facts import ReleaseFacts
from launcher.core.runtime_door import RUNTIME_PROG
from launcher.core.tpu.slices import cluster_slices, simulated_chips
from launcher.runtime.job import driver
from launcher.runtime.torch.job import RUN_DIR_ENV


def plan_torch_job(spec: TorchJobSpec, nodes: list[dict]) -> TorchPlan:
    if not os.path.isfile(spec.script):
        raise UsageError(
            spec.script,
            f"is not in the job's working directory ({os.getcwd()})",
            "submit from the directory that holds it (it ships with the job)",
        )
    return TorchPlan(
        spec, cluster_slices(nodes, ReleaseFacts.from_env().offered_slices), output_dir()
    )


def train_torch(spec: TorchJobSpec) -> int:
    started_at = time.time()
    check_image_runs(TORCH)
    nodes = driver.join_ray()
    plan = plan_torch_job(spec, nodes)
    script = os.path.abspath(spec.script)  # where Ray unpacked it, for every worker
    # Before any worker starts: the group the script's own init_process_group names is the
    # one this slice gives (launcher.runtime.torch.contract takes it on every chip).
    check_backends(Path(script), (SIMULATED_BACKEND if simulated_chips(nodes) else TPU_BACKEND,))
    print(f"launcher: {plan.describe()}", flush=True)
    print(f"launcher: pytorch {' '.join([spec.script, *spec.script_args])}", flush=True)
    if not uses_torch_job(Path(script).read_text()):
        print(PLAIN_SCRIPT_NOTE.format(script=spec.script), flush=True)
    if spec.dry_run:
        print(json.dumps({"num_workers": plan.num_workers, "run_dir": str(plan.run_dir.path)}))
        return 0
    from ray.train.v2.api.config import ScalingConfig
    from ray.train.v2.torch.torch_trainer import TorchTrainer

    from launcher.core.job.hangs import HangBound
    from launcher.runtime.job.host import WorkerConfig
    from launcher.runtime.torch.backend import LauncherTorchConfig
    from launcher.runtime.torch.worker import torch_loop_per_worker

    labels = driver.metric_labels(spec, plan.run_name, plan.slices.name)
    summary_key = driver.summary_key(plan.run_name)
    shape = plan.slices.shape
    loop: Any = torch_loop_per_worker  # Ray pickles the config to each worker, as it is
    trainer = TorchTrainer(
        loop,
        train_loop_config=cast(
            Any,
            WorkerConfig(
                argv=[script, *spec.script_args],
                steps=0,  # the script says (TorchJob.start)
                summary_key=summary_key,
                hosts_per_slice=plan.workers_per_slice,
                metric_labels=labels,
                hang_bound=HangBound(spec.hang_timeout_s, spec.hang_step_factor),
                run_dir=str(plan.run_dir.path),
                per_chip=True,
            ),
        ),
        torch_config=LauncherTorchConfig(topology=shape.topology),
        scaling_config=ScalingConfig(
            use_tpu=True,
            num_workers=plan.num_workers,
            topology=shape.topology,
            accelerator_type=shape.generation.ray_accelerator_type,
            resources_per_worker=plan.resources_per_worker,
            placement_strategy="SPREAD",
        ),
        run_config=driver.run_config(
            plan.run_name,
            plan.output_dir,
            spec,
            {
                RUN_DIR_ENV: str(plan.run_dir.path),
                # The script's print, once: Ray Train's capture of it wrote each line to the
                # log twice (itself, and again through its logger's console handler).
                "RAY_TRAIN_ENABLE_PRINT_PATCH": "0",
            },
        ),
    )
    return driver.drive(trainer, plan, summary_key, plan.run_dir, started_at, spec, labels, None)


def run(argv: list[str]) -> int:
    """`python -m launcher.runtime train-torch WORDS`."""
    if argv[:1] in (["-h"], ["--help"]):
        print((__doc__ or "").strip())
        return 0
    try:
        return train_torch(TorchJobSpec.parse(argv))
    except UsageError as e:
        return report(e, prog=f"{RUNTIME_PROG} train-torch")
