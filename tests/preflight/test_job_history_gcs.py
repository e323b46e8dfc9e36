"""A job's history read from gs:// (the GCS emulator): what `list|logs|status --bucket gs://...`
read when the bucket is not mounted on the workstation."""

from __future__ import annotations

import argparse
import json

import pytest

from launcher.client.jobs.history import history_at
from launcher.client.jobs.listing import run_list

pytestmark = pytest.mark.preflight


def test_the_recorded_jobs_of_every_run_under_a_prefix_read_back(storage, capsys):
    bucket = storage.bucket("ckpt")
    for run, job, started in (("a", "a-1", 100.0), ("b", "b-1", 200.0)):
        base = f"team/{run}/jobs/{job}"
        record = {"job_id": job, "state": "SUCCEEDED", "run": run, "started_at": started}
        bucket.blob(f"{base}/job.json").upload_from_string(json.dumps(record))
        bucket.blob(f"{base}/log.txt").upload_from_string(f"the log of {job}\n")
    # A checkpoint beside them is no record; another prefix is not read.
    bucket.blob("team/a/checkpoints/5/commit_success.txt").upload_from_string("")
    bucket.blob("other/c/jobs/c-1/job.json").upload_from_string('{"job_id": "c-1"}')

    history = history_at("gs://ckpt/team", None)
    assert history is not None and history.option == "--bucket gs://ckpt/team"
    assert [r.record["job_id"] for r in history.jobs()] == ["b-1", "a-1"]  # newest first
    found = history.job("a-1")
    assert found.where == "gs://ckpt/team/a/jobs/a-1"
    assert history.log(found) == "the log of a-1\n"
    # The bucket named bare, as install and gke name it, is its root: the runs lie one level
    # further down (team/a), so none is recorded right under it.
    whole = history_at("ckpt", None)
    assert whole is not None and whole.root == "gs://ckpt" and whole.jobs() == []
    # `list --bucket gs://ckpt/team --limit 1` as the command runs it.
    run_list(argparse.Namespace(bucket="gs://ckpt/team", data_dir=None, limit=1, json=True))
    listed = json.loads(capsys.readouterr().out)
    assert [(r["job_id"], r["run"]) for r in listed] == [("b-1", "b")]
