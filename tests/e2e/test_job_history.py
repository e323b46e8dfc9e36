"""History that outlives the cluster: the session's trained run ran on the first local cluster,
which the Ironwood module stopped (and started anew with another slice) before this module
runs; its job's log, state, step and goodput still answer `list`, `logs` and `status` from the
run's directory in the bucket, as the job's driver wrote them while it ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.core.job.events import EventKind, events, format_summary_title

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def test_list_logs_and_status_of_a_stopped_clusters_job_answer_from_the_bucket(
    local_cluster, trained_run
):
    assert trained_run.code == 0, trained_run.output[-3000:]
    bucket = str(local_cluster.bucket)
    listed = local_cluster.launcher("list", "--data-dir", bucket, "--json", "--limit", "100")
    assert listed.returncode == 0, listed.stderr
    assert f"from the bucket's history: {bucket}" in listed.stderr
    # The run's jobs: the trained one and, after the train test, the one it stopped and the one
    # that resumed it; each ended, and says how.
    rows = {r["job_id"]: r for r in json.loads(listed.stdout) if r["run"] == trained_run.name}
    assert {r["state"] for r in rows.values()} <= {"SUCCEEDED", "STOPPED"}, rows
    (full_log,) = events(trained_run.output, EventKind.FULL_LOG)
    job_id = Path(full_log.fields["path"]).stem  # submit's id of the trained job
    row = rows[job_id]
    assert (row["state"], row["step"], row["total_steps"]) == ("SUCCEEDED", 10, 10), row
    job_dir = trained_run.dir / "jobs" / job_id

    status = local_cluster.launcher("status", job_id, "--data-dir", bucket)
    assert status.returncode == 0, status.stderr
    assert f"from the bucket's history: {job_dir}" in status.stdout
    assert "goodput:" in status.stdout and f"job {job_id}: SUCCEEDED" in status.stdout
    shown = local_cluster.launcher("status", job_id, "--data-dir", bucket, "--json")
    as_json = json.loads(shown.stdout)
    assert as_json["goodput"]["wall_seconds"] > 0 and as_json["source"] == str(job_dir)

    logs = local_cluster.launcher("logs", job_id, "--data-dir", bucket)
    assert logs.returncode == 0, logs.stderr
    # The tidy view of the whole log, to its summary: every line the driver had when it ended.
    assert "[checkpoint] saved step 9" in logs.stdout
    assert format_summary_title("training") in logs.stdout
    assert "steps done:   10 of 10" in logs.stdout
