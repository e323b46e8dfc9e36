"""`tpu-launcher list`'s rows, from Ray's job details and the job's log."""

from __future__ import annotations

import dataclasses
import json

import pytest

from launcher.client.jobs.listing import cells, format_rows, last_step, row
from launcher.client.jobs.ray_api import JobInfo
from launcher.core.job.events import format_progress

pytestmark = pytest.mark.unit


def test_the_step_is_the_last_progress_line():
    lines = [format_progress(s, 40, 3.2, 0.5, 100, 1.0, None, 10) for s in (8, 16)]
    log = "\n".join(["(RayTrainWorker pid=1) " + lines[0], "noise", lines[1], "completed"])
    assert last_step(log) == (16, 40)
    assert last_step("no progress yet") is None


def test_a_row_names_the_run_from_metadata_else_the_entrypoint():
    # As GET /api/jobs/ answers (Ray 2.60's JobDetails, as JSON).
    details = {
        "type": "SUBMISSION",
        "submission_id": "demo-1",
        "job_id": None,
        "status": "RUNNING",
        "entrypoint": "python -m launcher.runtime train tiny-llama.yml run_name=fromargs",
        "metadata": {},
        "start_time": 1_000_000,
        "end_time": None,
        "runtime_env": {},
    }
    job = JobInfo.from_json(details)
    r = row(job, "", now_ms=1_000_000 + 151_000)
    assert (r.job_id, r.state, r.run, r.step, r.duration_seconds) == (
        "demo-1",
        "RUNNING",
        "fromargs",
        None,
        151.0,
    )
    assert cells(r)[3:] == ("-", cells(r)[4], "2m31s")
    job = JobInfo.from_json({**details, "metadata": {"run_name": "demo"}})
    assert row(job, "", now_ms=2_000_000).run == "demo"
    # `list --json`: what a script reads, in numbers.
    assert json.loads(json.dumps(dataclasses.asdict(row(job, "", now_ms=1_151_000)))) == {
        "job_id": "demo-1",
        "state": "RUNNING",
        "run": "demo",
        "step": None,
        "total_steps": None,
        "started_at": 1000.0,
        "duration_seconds": 151.0,
        "message": None,
        "goodput": None,
        "cost": None,  # the result line's, once the job has one
        "devices": None,  # the last [devices] line's verdict
        "restarts": None,  # the result line's, once the job has one
    }
    table = format_rows([r]).splitlines()
    assert table[0].split() == ["JOB", "STATE", "RUN", "STEP", "STARTED", "DURATION"]
    assert table[1].startswith("demo-1")
