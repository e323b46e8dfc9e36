"""What every TorchTrainer worker (one per chip) runs: the job's PyTorch script, as `python
script.py ARGS` would, inside the bookkeeping every framework's worker shares
(launcher.runtime.job.host.started), which reads the script's steps and saves through
launcher.runtime.torch.job."""

from __future__ import annotations

import runpy
import sys
import time

from launcher.runtime.borrowed.ray import quiet_report_lines
from launcher.runtime.job.host import WorkerConfig, started
from launcher.runtime.job.kv import publish_summary
from launcher.runtime.torch import job as torch_job
from launcher.runtime.torch.contract import marked_output, torchrun_contract
from launcher.runtime.torch.hosts import set_per_host_env


class ScriptFailed(RuntimeError):
    """The script exited with a status other than 0."""


def torch_loop_per_worker(config: WorkerConfig) -> None:
    torch_job._notice.clear()
    with started(
        config, jax_compiles=False, deliver=lambda _: torch_job._notice.set(), record_start=True
    ) as start:
        torch_job._tracker, torch_job._relay = start.tracker, start.relay
        quiet_report_lines()
        if torch_job.simulated():  # one machine's hosts: torchrun's per-host view, as on TPU
            note = set_per_host_env()
            if note and start.rank == 0:
                print(note, flush=True)
        began = time.monotonic()
        try:
            with torchrun_contract(config.argv[0]), marked_output(start.rank):
                run_script(config.argv)
        finally:
            torch_job._tracker = torch_job._relay = None
    if start.rank == 0:
        # The script's own time in the start that finished: a script that reports no steps is
        # measured by it (the summary's goodput by wall time).
        ran = {"script_seconds": time.monotonic() - began}
        publish_summary(
            config.summary_key,
            {**start.tracker.summary(), "total_steps": start.tracker.total_steps, **ran},
        )


def run_script(argv: list[str]) -> None:
    """`argv[0]` as the main module with `argv` as its sys.argv; exit 0 (or none) is success."""
    script = argv[0]
    saved = sys.argv
    sys.argv = list(argv)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise ScriptFailed(f"{script} exited with status {e.code}") from e
    finally:
        sys.argv = saved
