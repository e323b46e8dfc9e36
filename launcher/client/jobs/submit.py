"""`tpu-launcher submit`: what `ray job submit` does, over Ray's job API (jobs.ray_api), with the
job checked first and followed in a tidy view (`logs`, `status`, `stop`: job_actions).

    tpu-launcher submit [--address URL] [--submission-id ID] [--no-wait] -- [launcher flags]
        [maxtext config.yml] key=value ...

The address comes from --address, then RAY_API_SERVER_ADDRESS, then RAY_ADDRESS, then the local
cluster. The MaxText arguments are checked here first, so a typo fails in a second on your
machine instead of minutes later in the cluster. Submit follows the logs and exits 1 when the
job fails or is stopped (2 when the head refused it); --no-wait returns after submission.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from launcher.client.commands import run
from launcher.client.jobs.files import SKIPPED_DIRS, plan_shipment
from launcher.client.jobs.output import JobOutput
from launcher.client.jobs.ray_api import ENDED as JOB_ENDED
from launcher.client.jobs.ray_api import Dashboard, RayJobs, check_reachable, resolve_dashboard
from launcher.client.jobs.slice_target import bind_job_to, resolve_target
from launcher.client.workspace import state_dir
from launcher.core.errors import CONFIG_ERROR_EXIT_CODE
from launcher.core.job.events import format_full_log
from launcher.core.job.frameworks import JAX, Framework
from launcher.core.job.plan import Job, plan_job
from launcher.core.job.run_requests import (
    TRAIN_ENTRYPOINT,
    ExportRequest,
    GenerateRequest,
    ImportRequest,
    check_request,
)
from launcher.core.release_facts import NO_RELEASE

if TYPE_CHECKING:
    from launcher.client.release.helm_release import Release

# The last submission id, so `logs`, `status` and `stop` need no job id.
STATE_FILE = state_dir() / "last-submission"
# The job's metadata key for its run (what `tpu-launcher list` shows).
RUN_METADATA = "run_name"


def submission_id_for(run_name: str) -> str:
    safe = re.sub(r"[^a-zA-Z0-9-]", "-", run_name).strip("-")[:40] or "job"
    return f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}"


@dataclass(frozen=True)
class SubmitRequest:
    """`tpu-launcher submit`'s options, read once."""

    job: Job | None  # None: the request only says where (generate, export)
    address: str | None = None
    submission_id: str | None = None
    no_wait: bool = False
    dry_run: bool = False
    release: str | None = None
    namespace: str = "default"
    values: tuple[str, ...] = ()  # chart values files naming the target slice (preflight's)
    skip_preflight: bool = False
    verbose: bool = False  # every line of the job live, not only what matters
    working_dir: str | None = None  # a directory to ship as the job's working directory


def _can_compile_here() -> bool:
    """Preflight's compile needs JAX and MaxText (the preflight extra) on this machine."""
    from importlib.util import find_spec

    return all(find_spec(m) is not None for m in ("jax", "maxtext"))


def address_for(
    request: SubmitRequest,
    stack: contextlib.ExitStack,
    framework: Framework = JAX,
    read: Release | None = None,
) -> Dashboard:
    """A release's head, forwarded here (a job of the other framework refused), or --address.
    `read`: the release as resolve_target read it already (not read again)."""
    if request.release:
        from launcher.client.release.helm_release import forwarded

        return stack.enter_context(
            forwarded(read or request.release, request.namespace, request.dry_run, framework)
        )
    return resolve_dashboard(request.address, acting=not request.dry_run)  # a dry run acts on none


def submit(request: SubmitRequest) -> int:
    """Checks the job here; for a values file or a release, resolves its slice once, runs
    preflight for it and binds the job to it (the approved slice is the slice it runs on);
    submits it and follows it; 0 when it succeeded."""
    job = request.job
    if job is None:
        raise ValueError("submit needs a job")
    job_args = list(job.words)
    if request.dry_run and request.release:  # reading the release needs its cluster
        print(
            f"[dry-run] preflight: the job on the slice of release {request.release}, "
            "then bound to it",
            flush=True,
        )
        target = None
    else:
        target = resolve_target(request.values, request.release, request.namespace)
    from launcher.client.jobs.release_data import data_seen_here

    release = target.facts if target else NO_RELEASE
    mount = release.bucket if target and target.release else None
    with data_seen_here(job, mount) as seen:
        plan = plan_job(
            job.with_release(release),
            list(job.maxtext_argv),
            target=release.slices,
            data_root=seen[0] if seen else None,
            hosts_data_root=seen[1] if seen else None,
            release=release,
        )
    if target is not None and target.slices is not None:
        if request.dry_run and not request.skip_preflight:
            print(f"[dry-run] preflight: the job on the slice of {target.source}", flush=True)
        elif not request.skip_preflight and not _can_compile_here():
            from launcher.core.package_version import pip_install

            print(
                "preflight: checked here: the job's flags, MaxText's keys, kinds and "
                f"parallelism for {target.slices.describe()}; not here: the compile for its "
                f"TPU and its memory (no JAX and MaxText here: {pip_install('preflight')}, "
                "Linux x86_64); the head checks the job again before any host starts",
                flush=True,
            )
        elif not request.skip_preflight:
            from launcher.preflight.command import PreflightRequest, preflight

            code = preflight(
                PreflightRequest(
                    job,
                    plan=plan,
                    data_dir=f"gs://{mount.bucket}" if seen and mount else None,
                    release=target.facts,
                    target_source=target.source,
                )
            )
            if code:
                return code
        if job.options.slice_request() is None:
            job_args = bind_job_to(job_args, target.slices)
            print(
                f"launcher: the job is bound to {target.slices.describe()} ({target.source}): "
                "a cluster of another shape refuses it",
                flush=True,
            )
    with contextlib.ExitStack() as stack:
        staging = stack.enter_context(tempfile.TemporaryDirectory(prefix="tpu-launcher-job-"))
        shipment = plan_shipment(
            job_args, list(job.maxtext_argv), plan.args.config, request.working_dir, Path(staging)
        )
        for line in shipment.describe():
            print(line, flush=True)
        entrypoint = [*TRAIN_ENTRYPOINT, *shipment.job_args]
        return submit_entrypoint(
            request,
            plan.run_name,
            address_for(request, stack, read=target.release if target else None),
            entrypoint,
            working_dir=shipment.directory,
        )


def submit_run_request(
    request: GenerateRequest | ExportRequest | ImportRequest, target: SubmitRequest
) -> int:
    """Submits what `generate`, `export` or `import` asks of a model to `target`'s
    cluster and follows it; 0 when it succeeded. The run, its checkpoint and its model are
    found in the cluster (on the bucket); the request is checked here first."""
    check_request(request)
    with contextlib.ExitStack() as stack:
        return submit_entrypoint(
            target,
            # import:NAME as a word a job id and its log's file name can hold
            f"{request.verb}-{request.run.replace(':', '-')}",
            address_for(target, stack),
            request.command(),
            title=request.title,
        )


def submit_entrypoint(
    request: SubmitRequest,
    run_name: str,
    dashboard: Dashboard,
    entrypoint: list[str],
    title: str = "training",
    working_dir: Path | None = None,
    env_vars: dict[str, str] | None = None,
) -> int:
    """Submits `entrypoint` as `ray job submit --no-wait -- entrypoint` would (Ray's job API,
    ray_jobs_api), then follows the job; `working_dir` is uploaded and becomes the job's
    working directory on every host."""
    job_id = request.submission_id or submission_id_for(run_name)
    metadata = {RUN_METADATA: run_name}
    if request.dry_run:
        shipping = ["--working-dir", str(working_dir)] if working_dir is not None else []
        same = ["ray", "job", "submit", "--address", dashboard.address, "--submission-id", job_id]
        same += ["--metadata-json", json.dumps(metadata), *shipping, "--no-wait", "--"]
        run("submit the job", [*same, *entrypoint], dry_run=True)
    else:
        check_reachable(dashboard, request.release, request.namespace)
        jobs = RayJobs(dashboard)
        runtime_env = None
        if working_dir is not None:
            # What job_files listed is what ships: its exclusions, and no .gitignore of the
            # user's. Nodes fetch it when the job's workers start there, not all at once when
            # the driver connects: the simulated hosts of the local cluster share one
            # directory, and a fetch replaces the package's directory under the processes
            # already running in it.
            runtime_env = {
                "working_dir": jobs.upload_directory(working_dir, SKIPPED_DIRS),
                "config": {"eager_install": False},
            }
        if env_vars:
            runtime_env = {**(runtime_env or {}), "env_vars": env_vars}
        jobs.submit(entrypoint, job_id, metadata, runtime_env)
        STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
        STATE_FILE.write_text(f"{job_id}\n{dashboard.address}\n")
    print(
        f"{'would submit' if request.dry_run else 'submitted'} job {job_id} to {dashboard}",
        flush=True,
    )
    if request.no_wait or request.dry_run:
        _next_steps(job_id, title, request)
        return 0
    output = JobOutput(log_path(job_id), verbose=request.verbose, title=title)
    if request.release:  # the forwarded port closes with this command
        print(f"dashboard: `helm status {request.release}` shows its port-forward", flush=True)
    else:
        print(f"dashboard: {dashboard}/#/jobs/{job_id}", flush=True)
    print(format_full_log(output.log_path), flush=True)
    jobs = RayJobs(dashboard)
    try:
        follow_job(jobs, job_id, output)
    except KeyboardInterrupt:
        output.close()
        print(f"\nstopped following; job {job_id} goes on (`tpu-launcher stop {job_id}` stops it)")
        return 130
    output.close()
    info = jobs.info(job_id)
    status = info.status if info else "FAILED"
    if status != "SUCCEEDED" and not request.verbose:
        print(f"\nthe job's last lines ({output.log_path} has them all):")
        for line in output.failure_tail():
            print(f"  {line}")
    print(f"\njob {job_id}: {status}", flush=True)
    _next_steps(job_id, title, request)
    if status == "SUCCEEDED":
        return 0
    # The head refused the job before any host started (its checks, exit 2): the same code as
    # a refusal here, which a script tells from a job that failed while it ran.
    refused = info is not None and info.driver_exit_code == CONFIG_ERROR_EXIT_CODE
    return CONFIG_ERROR_EXIT_CODE if refused else 1


def log_path(job_id: str) -> Path:
    """Where a job's whole log is kept on this machine."""
    return STATE_FILE.parent / "logs" / f"{job_id}.log"


def follow_job(jobs: RayJobs, job_id: str, output: JobOutput) -> None:
    """Feeds the job's log into `output` until the job ends. Ray's job API serves the whole
    log on each read (no offset; its tail is a websocket), so the poll slows as the log grows:
    a second apart up to 1 MB, at most 15 s apart."""
    seen = output.fed
    while True:
        ended = jobs.status(job_id) in JOB_ENDED  # before the read: no line is left unread
        logs = jobs.logs(job_id)
        output.feed(logs[seen:])
        seen = len(logs)
        if ended:
            return
        time.sleep(min(15.0, max(1.0, len(logs) / 1_000_000)))


def _next_steps(job_id: str, title: str, request: SubmitRequest) -> None:
    """The commands that follow the job, naming the cluster it went to as submit was told."""
    import shlex

    where = [job_id]
    if request.release:
        where += ["--release", request.release]
        where += ["--namespace", request.namespace] if request.namespace != "default" else []
    elif request.address:
        where += ["--address", request.address]
    job = shlex.join(where)
    print("next steps:")
    print(f"  tpu-launcher logs {job}     # the job's whole log (--follow: live)")
    print(f"  tpu-launcher status {job}   # PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED")
    if title == "training":
        print(f"  tpu-launcher stop {job}     # stop it; checkpoints stay, a resubmit resumes")
