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
import dataclasses
import json
import re
import sys
import time
from dataclasses import dataclass

from launcher.client.cluster_options import add_bucket_option, add_where_options
from launcher.client.ray_jobs_api import JobInfo, RayJobs, check_reachable, resolve_address
from launcher.core.job_events import EventKind, events, last_result

_RUN_ARG = re.compile(r"""(?:^|\s)run_name=([^\s'"]+)""")


@dataclass(frozen=True)
class JobRow:
    """One job, as `list` shows it and `list --json` writes it."""

    job_id: str
    state: str
    run: str | None
    step: int | None  # the last step logged (1-based, as the progress line counts)
    total_steps: int | None
    started_at: float | None  # seconds since the epoch
    duration_seconds: float | None  # so far, for a job that has not ended

    def cells(self) -> tuple[str, ...]:
        started = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
            if self.started_at
            else "-"
        )
        return (
            self.job_id,
            self.state,
            self.run or "-",
            f"{self.step}/{self.total_steps}" if self.step is not None else "-",
            started,
            _duration(self.duration_seconds) if self.duration_seconds is not None else "-",
        )


HEADER = ("JOB", "STATE", "RUN", "STEP", "STARTED", "DURATION")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def last_step(logs: str) -> tuple[int, int] | None:
    """(step, total) of the job's last progress line, or None."""
    if progress := events(logs, EventKind.PROGRESS):
        return int(progress[-1].fields["step"]), int(progress[-1].fields["total"])
    return None


def row(job: JobInfo, logs: str, now_ms: float) -> JobRow:
    """One job, from what the dashboard says of it and its log."""
    metadata = job.metadata or {}
    run = metadata.get("run_name") or (
        m[1] if (m := _RUN_ARG.search(job.entrypoint or "")) else None
    )
    start = job.start_time or 0
    step, total = last_step(logs) or (None, None)
    return JobRow(
        job.submission_id or job.job_id or "-",
        job.status,
        run,
        step,
        total,
        start / 1000 if start else None,
        ((job.end_time or now_ms) - start) / 1000 if start else None,
    )


def format_rows(rows: list[JobRow]) -> str:
    table = [HEADER, *(r.cells() for r in rows)]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()
        for cells in table
    )


def list_jobs(address: str, limit: int) -> list[JobRow]:
    client = RayJobs(address)
    jobs = [j for j in client.jobs() if j.submission_id]  # not drivers run by hand
    jobs.sort(key=lambda j: j.start_time or 0, reverse=True)
    now_ms = time.time() * 1000
    return [row(j, client.logs(j.submission_id or ""), now_ms) for j in jobs[:limit]]


def list_rows(root: str, limit: int) -> list[JobRow]:
    """`list --bucket`: list's row of each recorded job, newest first."""
    from launcher.client.job_history import BucketHistory

    rows = []
    for recorded in BucketHistory(root).jobs()[:limit]:
        r = recorded.record
        rows.append(
            JobRow(
                r["job_id"],
                r.get("state", "UNKNOWN"),
                r.get("run"),
                r.get("step"),
                r.get("total_steps"),
                r.get("started_at"),
                r.get("duration_seconds"),
            )
        )
    return rows


def run_list(ns: argparse.Namespace) -> int:
    if ns.bucket:
        from launcher.client.job_history import source_line

        rows = list_rows(ns.bucket, ns.limit)
        print(source_line(ns.bucket), file=sys.stderr)
        _print(rows, ns.json, f"no job recorded under {ns.bucket} yet")
        return 0
    with contextlib.ExitStack() as stack:
        if ns.release:
            from launcher.client.helm_release import forwarded

            address = stack.enter_context(forwarded(ns.release, ns.namespace))
        else:
            address = resolve_address(ns.address)
        check_reachable(address, ns.release, ns.namespace)
        rows = list_jobs(address, ns.limit)
    _print(rows, ns.json, f"no jobs on the Ray cluster at {address} yet")
    return 0


def _print(rows: list[JobRow], as_json: bool, none: str) -> None:
    if as_json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    else:
        print(format_rows(rows) if rows else none)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="the cluster's jobs: id, state, run, step, start, duration")
    add_where_options(p, verbose=False)
    p.add_argument("--limit", type=int, default=20, help="the newest N jobs (default 20)")
    add_bucket_option(p)
    p.add_argument(
        "--json",
        action="store_true",
        help="a JSON list, one object a job: job_id, state, run, step, total_steps, started_at "
        "(epoch seconds), duration_seconds (null where unknown)",
    )
    p.set_defaults(func=run_list)


def status_json(info: JobInfo, logs: str) -> dict:
    """`status --json`: what `list --json` says of the job, Ray's message, the goodput."""
    result = last_result(logs) or {}
    return {
        **dataclasses.asdict(row(info, logs, time.time() * 1000)),
        "message": info.message,
        "goodput": result.get("goodput"),
    }
