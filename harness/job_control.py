"""Watching and disturbing a job on the local Ray cluster from outside, as an operator would:
its log through Ray's job API, its hosts as processes (the fault tests and the recovery
benchmark)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

import psutil

from harness.paths import REPO
from launcher.client.jobs.ray_api import ENDED, Dashboard, RayJobs, default_address
from launcher.client.local.cluster import TOKEN_AUTH
from launcher.client.local.instance import MEMBER_ENV, local_instance
from launcher.client.local.layout import HOST_ENV
from launcher.client.local.nodes import processes_with_env
from launcher.runtime.train.progress import steps_logged

RESTORED = re.compile(r"restoring from this run's directory step (\d+)")


def jobs_client() -> RayJobs:
    """The launcher's own client of Ray's job API, on the local cluster (its token is Ray's
    token file, ~/.ray/auth_token, which the client reads as Ray's clients do)."""
    return RayJobs(Dashboard(default_address()))


def wait_for_step(client, job_id: str, step: int, timeout: float = 600) -> str:
    """The job's log once a host has logged `step`. A resumed job's first steps come after
    its workers, its restore and its compile: about a minute on this project's 2-core machines,
    over 3 minutes with one core to the job (a cgroup's quota), past 5 on one CI machine."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = client.logs(job_id)
        steps = steps_logged(logs)
        if steps and max(steps) >= step:
            return logs
        assert client.status(job_id) not in ("FAILED", "STOPPED"), logs[-3000:]
        time.sleep(1)
    _given_up(client, job_id, f"did not reach step {step} in {timeout}s")


def wait_until_done(client, job_id: str, timeout: float = 600) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.status(job_id)
        if status in ENDED:
            return status
        time.sleep(2)
    _given_up(client, job_id, f"still running after {timeout}s")


def _given_up(client, job_id: str, what: str) -> NoReturn:
    """A job a test waited for in vain is stopped (left running, it would hold the shared
    cluster's CPUs through every later test) and the failure shows what it was doing."""
    logs = client.logs(job_id)
    client.stop(job_id)
    raise AssertionError(f"job {job_id} {what}; stopped it. Its log's end:\n{logs[-4000:]}")


def _train_workers_among(processes: list[psutil.Process]) -> list[psutil.Process]:
    found = []
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            if "RayTrainWorker" in " ".join(proc.cmdline()):
                found.append(proc)
    return sorted(found, key=lambda p: p.pid)


def train_workers() -> list[psutil.Process]:
    """The Ray Train workers running in the tests' own local cluster (a user's cluster beside
    it runs its own): one per simulated host for a MaxText job, one per chip for a PyTorch
    job."""
    slot = str(local_instance().slot)
    return _train_workers_among(processes_with_env(MEMBER_ENV, {slot}))


def _a_train_worker() -> int:
    """The pid of the last of the two Ray Train workers (one per simulated host)."""
    workers = train_workers()
    assert len(workers) == 2, "expected one Ray Train worker per simulated host"
    return workers[-1].pid


def kill_every_worker_of(host: str) -> list[int]:
    """SIGKILLs the Ray Train workers of one simulated host (every chip's process, as when the
    host dies); returns their pids."""
    pids = []
    for proc in _train_workers_among(processes_with_env(HOST_ENV, {host})):
        with contextlib.suppress(psutil.Error):
            os.kill(proc.pid, signal.SIGKILL)
            pids.append(proc.pid)
    assert pids, f"no Ray Train worker on {host}"
    return pids


def stop_a_host() -> tuple[int, float]:
    """SIGSTOPs one of the two Ray Train workers (every thread of it halts, as a host stuck in
    the input pipeline or on a gcsfuse read leaves it); returns its pid and when."""
    pid = _a_train_worker()
    os.kill(pid, signal.SIGSTOP)
    return pid, time.monotonic()


def submit_no_wait(
    cluster, job_id: str, *job_args: str, cwd: Path = REPO, options: tuple[str, ...] = ()
) -> str:
    """Submits through `tpu-launcher submit --no-wait [options]` (the LocalCluster's) under
    `job_id`, from `cwd` (what ships with the job); returns what submit printed."""
    extra = ("--no-wait", "--submission-id", job_id, *options)
    code, out = cluster.submit(*job_args, extra=extra, cwd=cwd)
    assert code == 0, out
    return out


def drained_for_preemption() -> dict[str, float]:
    """The hosts Ray saw die drained for preemption, and when, as a job's driver reads them
    (launcher.runtime.job.outcome.preempted_hosts), from a driver of the local cluster."""
    # The answer goes to a file and the driver takes no worker logs: a driver's stdout also
    # carries the cluster's worker lines (in CI once a JAX host's log line after the JSON).
    with tempfile.NamedTemporaryFile("r", suffix=".json") as answer:
        code = (
            "import json, ray, sys\n"
            f"ray.init(address='{local_instance().head_address}', logging_level='ERROR',"
            " log_to_driver=False)\n"
            "from launcher.runtime.job.outcome import preempted_hosts\n"
            "with open(sys.argv[1], 'w') as f:\n"
            "    json.dump(preempted_hosts(), f)\n"
        )
        env = {**os.environ, **TOKEN_AUTH}
        out = subprocess.run(
            [sys.executable, "-c", code, answer.name],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        return json.load(answer)
