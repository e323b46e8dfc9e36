"""`tpu-launcher list`: the cluster's jobs, newest first, with the project's own token auth
(Ray's `ray job list` sends none unless RAY_AUTH_MODE=token is set by hand), over Ray's job API:

    JOB                          STATE      RUN          STEP     STARTED              DURATION
    demo-20261124-031502         SUCCEEDED  demo         40/40    2026-11-24 03:15:02  2m31s

The step is the job's last `[progress]` line; the run, what submit recorded in the job's
metadata (or the entrypoint's run_name=).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time

from launcher.client.cluster_options import add_history_options, add_where_options
from launcher.client.jobs.ray_api import (
    Dashboard,
    JobInfo,
    RayJobs,
    check_reachable,
    resolve_dashboard,
)
from launcher.core.job.events import last_devices, last_result, last_step
from launcher.core.job.goodput import Goodput
from launcher.core.job.record import FIELDS, JobRecord
from launcher.core.tpu.prices import JobCost

_RUN_ARG = re.compile(r"""(?:^|\s)run_name=([^\s'"]+)""")


def cells(record: JobRecord) -> tuple[str, ...]:
    """A job's row in `list`'s table."""
    started = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started_at))
        if record.started_at
        else "-"
    )
    return (
        record.job_id,
        record.state,
        record.run or "-",
        f"{record.step}/{record.total_steps}" if record.step is not None else "-",
        started,
        _duration(record.duration_seconds) if record.duration_seconds is not None else "-",
    )


HEADER = ("JOB", "STATE", "RUN", "STEP", "STARTED", "DURATION")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def row(job: JobInfo, logs: str, now_ms: float) -> JobRecord:
    """One job's record, from what the dashboard says of it and its log."""
    metadata = job.metadata or {}
    run = metadata.get("run_name") or (
        m[1] if (m := _RUN_ARG.search(job.entrypoint or "")) else None
    )
    start = job.start_time or 0
    step, total = last_step(logs) or (None, None)
    result = last_result(logs) or {}
    return JobRecord(
        job.submission_id or job.job_id or "-",
        job.status,
        run,
        step,
        total,
        start / 1000 if start else None,
        ((job.end_time or now_ms) - start) / 1000 if start else None,
        job.message,
        Goodput.from_json(result["goodput"]) if result.get("goodput") else None,
        JobCost.from_json(result["cost"]) if result.get("cost") else None,
        last_devices(logs),
        result.get("restarts"),
    )


def format_rows(rows: list[JobRecord]) -> str:
    table = [HEADER, *(cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def list_jobs(dashboard: Dashboard, limit: int) -> list[JobRecord]:
    client = RayJobs(dashboard)
    jobs = [j for j in client.jobs() if j.submission_id]  # not drivers run by hand
    jobs.sort(key=lambda j: j.start_time or 0, reverse=True)
    now_ms = time.time() * 1000
    return [row(j, client.logs(j.submission_id or ""), now_ms) for j in jobs[:limit]]


def run_list(ns: argparse.Namespace) -> int:
    from launcher.client.jobs.history import history_at, source_line

    if history := history_at(ns.bucket, ns.data_dir):
        rows = [recorded.job for recorded in history.jobs()[: ns.limit]]
        print(source_line(history.root), file=sys.stderr)
        _print(rows, ns.json, f"no job recorded under {history.root} yet")
        return 0
    with contextlib.ExitStack() as stack:
        if ns.release:
            from launcher.client.release.helm_release import forwarded

            dashboard = stack.enter_context(forwarded(ns.release, ns.namespace))
        else:
            dashboard = resolve_dashboard(ns.address)
        check_reachable(dashboard, ns.release, ns.namespace)
        rows = list_jobs(dashboard, ns.limit)
    _print(rows, ns.json, f"no jobs on the Ray cluster at {dashboard} yet")
    return 0


def _print(rows: list[JobRecord], as_json: bool, none: str) -> None:
    if as_json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
    else:
        print(format_rows(rows) if rows else none)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="the cluster's jobs: id, state, run, step, start, duration")
    add_where_options(p, verbose=False)
    p.add_argument("--limit", type=int, default=20, help="the newest N jobs (default 20)")
    add_history_options(p)
    p.add_argument(
        "--json",
        action="store_true",
        help=f"a JSON list, one object a job: {', '.join(FIELDS)} (times in epoch seconds; "
        "null where unknown), as `status --json` and the job's history give it",
    )
    p.set_defaults(func=run_list)


def status_json(info: JobInfo, logs: str) -> dict:
    """`status --json`: the job's record, as `list --json` gives it."""
    return row(info, logs, time.time() * 1000).to_json()
