"""`tpu-launcher logs|status|stop`: a job the cluster runs (default: the last one submitted from
here), on an address, on a chart release's head (port-forwarded, its token sent), or from its
history in the bucket; what `ray job logs|status|stop` do, in the view `submit` shows."""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING

from launcher.client.jobs.output import JobOutput
from launcher.client.jobs.ray_api import (
    ENDED,
    Dashboard,
    RayJobs,
    check_reachable,
    resolve_dashboard,
)
from launcher.client.jobs.submit import STATE_FILE, follow_job, log_path
from launcher.core.errors import UsageError
from launcher.core.job.events import EventKind, events, last_devices, last_result
from launcher.core.job.goodput import (
    Goodput,
    format_breakdown,
    format_compile_cache,
    format_timeline,
)
from launcher.core.tpu.preemption import Restart, format_restarts
from launcher.core.tpu.prices import JobCost, format_cost

if TYPE_CHECKING:
    from launcher.client.jobs.history import BucketHistory


def _last_job() -> tuple[str | None, str | None]:
    if STATE_FILE.is_file():
        job_id, _, address = STATE_FILE.read_text().partition("\n")
        return job_id.strip() or None, address.strip() or None
    return None, None


def act_on_job(
    command: str,
    job: str | None,
    address: str | None,
    follow: bool = False,
    release: str | None = None,
    namespace: str = "default",
    raw: bool = False,
    wait: bool = False,
    as_json: bool = False,
    history: BucketHistory | None = None,
) -> int:
    """`logs`, `status` or `stop` of a job (default: the last one submitted from here), on
    `address`, or on a chart release's head (port-forwarded, its token sent), or from its
    `history` in the bucket. `status --wait` returns when the job has ended, with ENDED's code
    for how."""
    last_id, last_address = _last_job()
    job_id = job or last_id
    if history is not None:
        if not job_id:
            raise UsageError("job", "no job id given", "pass the submission id")
        if follow or wait or command == "stop":
            raise UsageError(
                history.flag,
                "a job's history in the bucket is read, not followed, waited on or stopped",
                f"ask the Ray cluster that runs it: drop {history.flag}",
            )
        from launcher.client.jobs.history import act_on_recorded

        return act_on_recorded(command, job_id, history, raw, as_json, show_log_text)
    read = None  # the release, once read
    if release and not job:  # a RayJob release: its own job, or what it waits for
        from launcher.client.jobs.pending_reasons import why_not_running
        from launcher.client.release.helm_release import Release, rayjob_state

        read = Release.read(release, namespace)
        if command == "status" and read.raycluster is None and read.rayjob is None:
            from launcher.client.release.helm_release import get_items
            from launcher.client.serve import status as serving_status

            if (serving := serving_status.read(release, namespace, get_items)) is not None:
                shown = [json.dumps(serving.as_json())] if as_json else serving.lines()
                print("\n".join(shown), flush=True)
                return 0 if serving.stage != "failed" else 1
        pending = why_not_running(read) if command == "status" else None
        if (rayjob := read.rayjob) is not None:
            if command == "stop":
                raise UsageError(
                    "--release",
                    f"release {release!r} is a RayJob: stopping it is removing it",
                    f"helm uninstall {release} -n {namespace} (its checkpoints stay in the "
                    "bucket; installing it again resumes)",
                )
            job_id, state = rayjob_state(rayjob)
            print(state, flush=True)
            if job_id is None and pending is not None and not as_json:
                pending.print()
            elif pending is not None and pending.admissions and not as_json:
                print("\n".join(pending.admissions), flush=True)
            while job_id is None and wait and rayjob is not None:  # queued, or starting
                time.sleep(WAIT_POLL_S)
                read = Release.read(release, namespace)
                if (rayjob := read.rayjob) is not None:
                    job_id, now = rayjob_state(rayjob)
                    if now != state:
                        print(now, flush=True)
                    state = now
            if job_id is None:  # nothing to ask Ray yet (or the RayJob is gone)
                if as_json:
                    print(json.dumps({"job_id": None, "state": state, **_pending_json(pending)}))
                return 0 if not wait else 1
        elif pending is not None and (not pending.head_running or not job_id):
            # A standing cluster not up yet, or up with no job to ask Ray about: the release.
            state = "its Ray head runs" if pending.head_running else "its Ray head is not running"
            if as_json:
                print(json.dumps({"job_id": None, "state": state, **_pending_json(pending)}))
            else:
                print(f"release {release}: {state}", flush=True)
                pending.print()
                if pending.head_running:
                    print(f"its jobs: tpu-launcher list --release {release}")
            return 0 if not wait else 1
        elif pending is not None and not as_json:
            pending.print()  # a slice partly up, say, under a running head
    if not job_id:
        raise UsageError(
            "job",
            "no job id given and none submitted from here yet",
            "pass the submission id (`tpu-launcher list` lists the cluster's jobs)",
        )
    with contextlib.ExitStack() as stack:
        if release:
            from launcher.client.release.helm_release import forwarded

            dashboard = stack.enter_context(forwarded(read or release, namespace))
        else:
            dashboard = resolve_dashboard(
                address or (last_address if not job else None), acting=command == "stop"
            )
        return _act_on_job(command, job_id, dashboard, follow, raw, wait, as_json)


def _pending_json(pending) -> dict:
    """`status --json`'s reasons a release's job is not running (empty when none)."""
    reasons = pending.reasons if pending is not None else []
    found: dict = {"pending": [{"reason": r.what, "fix": r.fix} for r in reasons]}
    if pending is not None and pending.admissions:
        found["capacity"] = pending.admissions
    return found


WAIT_POLL_S = 5.0


def _act_on_job(
    command: str,
    job_id: str,
    dashboard: Dashboard,
    follow: bool,
    raw: bool = False,
    wait: bool = False,
    as_json: bool = False,
) -> int:
    check_reachable(dashboard)
    jobs = RayJobs(dashboard)
    if (info := jobs.info(job_id)) is None:
        raise UsageError(
            "job",
            f"no job {job_id!r} on the Ray cluster at {dashboard}",
            f"list the jobs with `tpu-launcher list --address {dashboard}`; a job whose cluster "
            "is gone is read from its history: --bucket BUCKET (or --data-dir, the bucket's mount)",
        ) from None
    if command == "logs":
        return _show_logs(jobs, job_id, follow, raw)
    if command == "stop":
        return _stop(jobs, job_id)
    if wait:
        while (info := jobs.info(job_id) or info).status not in ENDED:
            time.sleep(WAIT_POLL_S)
    if as_json:
        from launcher.client.jobs.listing import status_json

        print(json.dumps(status_json(info, jobs.logs(job_id)), indent=2))
        return ENDED[info.status] if wait else 0
    if info.message:
        print(f"Ray: {info.message}")
    _print_goodput(jobs, job_id)
    print(f"job {job_id}: {info.status}")  # one word a script can read
    return ENDED[info.status] if wait else 0


def _stop(jobs: RayJobs, job_id: str, timeout_s: float = 120.0) -> int:
    """Asks Ray to stop the job and waits until it has (as `ray job stop` does)."""
    if not jobs.stop(job_id):
        print(f"job {job_id}: {jobs.status(job_id)} already")
        return 0
    deadline = time.monotonic() + timeout_s
    while (state := jobs.status(job_id)) not in ENDED and time.monotonic() < deadline:
        time.sleep(1)
    print(f"job {job_id}: {state}")
    return 0 if state in ENDED else 1


def _show_logs(jobs: RayJobs, job_id: str, follow: bool, raw: bool) -> int:
    """The job's log as submit shows it (plan, progress, checkpoints, restarts, the summary),
    or every line with `raw`; the whole log is written to the job's log file either way."""
    if not follow:
        return show_log_text(job_id, jobs.logs(job_id), raw)
    output = JobOutput(log_path(job_id), verbose=raw)
    try:
        follow_job(jobs, job_id, output)
    finally:
        output.close()
    if not raw:
        print(f"full log: {log_path(job_id)}")
    return 0


def show_log_text(job_id: str, text: str, raw: bool) -> int:
    """A whole log of a job as `logs` shows it; the log itself to the job's log file."""
    output = JobOutput(log_path(job_id), verbose=raw)
    try:
        output.feed(text)
    finally:
        output.close()
    if not raw:
        print(f"full log: {log_path(job_id)}")
    return 0


def _print_goodput(jobs: RayJobs, job_id: str) -> None:
    """Where the job's time went, from its result line (once it has one)."""
    logs = jobs.logs(job_id)
    if preempted := events(logs, EventKind.PREEMPTED):
        print(f"preempted, resumed at step {preempted[-1].fields['step']}")
    if devices := last_devices(logs):
        print(devices["line"])
    if result := last_result(logs):
        if "goodput" in result:
            print("\n".join(format_breakdown(Goodput.from_json(result["goodput"]))))
        if "compile_cache" in result:
            print(format_compile_cache(result["compile_cache"]))
        for line in format_timeline([s.get("timeline") for s in result.get("starts", [])]):
            print(line)
        if result.get("cost"):
            print(format_cost(JobCost.from_json(result["cost"])))
        for line in format_restarts([Restart(**r) for r in result.get("restarts") or []]):
            print(line)
