"""A job's history, written as its driver writes it (a Ray driver log growing on disk, copied
to <run>/jobs/<id>/ with its record) and read back by `list|logs|status --bucket` with no Ray
cluster anywhere. The e2e test (tests/e2e/test_job_history.py) reads a real job's history after
the cluster that ran it was stopped; tests/preflight/test_job_history_gcs.py reads gs://."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.paths import REPO
from launcher.core.job.events import format_progress, format_result, format_summary_title
from launcher.core.job.goodput import breakdown
from launcher.core.job.record import RUNNING, JobRecord
from launcher.runtime.job import history_writer as job_history_writer
from launcher.runtime.job.history_writer import JobHistoryWriter, driver_log

pytestmark = pytest.mark.unit
JOB = "demo-20261126-031502"


def test_the_driver_finds_its_job_from_the_log_ray_writes_its_output_to(monkeypatch):
    log = f"/tmp/ray/session_2026-11-26/logs/job-driver-{JOB}.log"
    monkeypatch.setattr(job_history_writer.os, "readlink", lambda fd: log)
    assert driver_log() == (JOB, Path(log))
    monkeypatch.setattr(job_history_writer.os, "readlink", lambda fd: "/dev/pts/0")
    assert driver_log() is None  # a driver run by hand keeps no history


def _tpu_launcher(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher", *argv], cwd=REPO, capture_output=True, text=True
    )


def test_a_job_written_as_it_runs_reads_back_without_a_cluster(tmp_path):
    bucket, ray_log = tmp_path / "bucket", tmp_path / f"job-driver-{JOB}.log"
    ray_log.write_text("launcher: v5p-16 (TPU v5p 2x2x2: 2 hosts x 4 chips)\n")
    writer = JobHistoryWriter(
        bucket / "demo", JOB, ray_log, JobRecord(JOB, RUNNING, run="demo", total_steps=10),
        lambda: breakdown([], 1000.0, 1050.0),  # the driver's goodput so far: 50 s, no start
    ).start()  # fmt: skip
    job_dir = bucket / "demo" / "jobs" / JOB
    record = json.loads((job_dir / "job.json").read_text())
    assert (record["state"], record["run"], record["step"]) == ("RUNNING", "demo", None)
    # A line cut in the middle is counted once whole.
    line = format_progress(4, 10, 3.2, 0.5, 400, None, None, 3)
    with ray_log.open("a") as f:
        f.write(f"(RayTrainWorker pid=9) {line[:20]}")
    writer.update()
    with ray_log.open("a") as f:
        f.write(f"{line[20:]}\n")
    writer.update()
    assert json.loads((job_dir / "job.json").read_text())["step"] == 4
    with ray_log.open("a") as f:
        f.write(format_summary_title("training") + "\n" + format_result({"last_step": 9}) + "\n")
    writer.finish("SUCCEEDED", {"last_step": 9})
    assert (job_dir / "log.txt").read_text() == ray_log.read_text()
    record = json.loads((job_dir / "job.json").read_text())
    assert record["state"] == "SUCCEEDED" and record["result"] == {"last_step": 9}

    listed = _tpu_launcher("list", "--data-dir", str(bucket), "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert (row["job_id"], row["state"], row["run"], row["step"]) == (JOB, "SUCCEEDED", "demo", 4)
    assert f"from the bucket's history: {bucket}" in listed.stderr
    # One record, three readers: the history file, `list --json` and `status --json`.
    shown = json.loads(_tpu_launcher("status", JOB, "--data-dir", str(bucket), "--json").stdout)
    assert shown.pop("source") == str(job_dir)
    assert row == shown == JobRecord.from_json(record).to_json()
    assert row["goodput"]["wall_seconds"] == 50.0
    status = _tpu_launcher("status", JOB, "--data-dir", str(bucket))
    assert status.returncode == 0, status.stderr
    assert f"from the bucket's history: {job_dir} (the Ray cluster is not asked)" in status.stdout
    assert "goodput:" in status.stdout and status.stdout.endswith(f"job {JOB}: SUCCEEDED\n")
    logs = _tpu_launcher("logs", JOB, "--data-dir", str(bucket))
    assert logs.returncode == 0, logs.stderr
    assert line in logs.stdout and format_summary_title("training") in logs.stdout


def test_what_the_bucket_cannot_answer_is_said(tmp_path):
    (tmp_path / "run").mkdir()
    missing = _tpu_launcher("status", "nope", "--data-dir", str(tmp_path))
    assert missing.returncode == 2
    assert f"no job 'nope' recorded under {tmp_path}" in missing.stderr
    waited = _tpu_launcher("status", "nope", "--data-dir", str(tmp_path), "--wait")
    assert waited.returncode == 2 and "drop --data-dir" in waited.stderr
    no_dir = _tpu_launcher("list", "--data-dir", str(tmp_path / "absent"))
    assert no_dir.returncode == 2 and "is not a directory" in no_dir.stderr


def test_a_stopped_driver_records_stopped_before_it_goes(tmp_path):
    """`ray job stop` sends the driver SIGTERM (SIGKILL 3 s later): its record says STOPPED."""
    ray_log = tmp_path / f"job-driver-{JOB}.log"
    ray_log.write_text("launcher: starting\n")
    driver = subprocess.Popen(
        [sys.executable, "-c", f"""
import sys, time
from pathlib import Path
from launcher.runtime.job.history_writer import JobHistoryWriter
from launcher.core.job.record import JobRecord
JobHistoryWriter(Path({str(tmp_path / "demo")!r}), {JOB!r}, Path({str(ray_log)!r}),
                 JobRecord({JOB!r}, "RUNNING", run="demo")).start().finish_on_sigterm()
print("ready", flush=True)
time.sleep(60)
"""],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert driver.stdout is not None and driver.stdout.readline() == "ready\n"
    driver.terminate()
    assert driver.wait(timeout=30) == 128 + 15
    record = json.loads((tmp_path / "demo" / "jobs" / JOB / "job.json").read_text())
    assert record["state"] == "STOPPED" and "ended_at" in record


def test_a_records_goodput_and_cost_are_typed_and_their_json_is_the_result_lines():
    from launcher.core.job.goodput import WALL_TIME, by_wall_time
    from launcher.core.tpu.prices import Price, job_cost

    goodput = by_wall_time(breakdown([], 0.0, 100.0), 60.0)
    cost = job_cost(Price(2.0, "a test's"), 8, 3600.0, 0.6, 10, 1_000_000)
    record = JobRecord(JOB, "SUCCEEDED", goodput=goodput, cost=cost)
    as_json = json.loads(json.dumps(record.to_json()))
    assert as_json["goodput"] == goodput.to_json() and as_json["goodput"]["by"] == WALL_TIME
    assert as_json["cost"] == cost.to_json() and as_json["cost"]["usd"] == 16.0
    assert JobRecord.from_json(as_json) == record  # the cost's JSON is rounded: exact here
    assert "by" not in breakdown([], 0.0, 1.0).to_json()  # a step clock's, as before
