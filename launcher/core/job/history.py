"""A job's history in its run's directory on the bucket, which outlives the cluster and the
RayJob that ran it: the driver writes it as the job runs (launcher.runtime.job.history_writer)
and `tpu-launcher list|logs|status --bucket` read it back (launcher.client.jobs.history).

    <run>/jobs/<submission id>/
      job.json   the job as `list --json` and `status --json` show it (state: RUNNING, then
                 SUCCEEDED, FAILED or STOPPED; run, step, times),
                 its goodput so far and, once it ended, its result line's record
      log.txt    Ray's whole log of the job (what `ray job logs` prints), copied as it grows
"""

from __future__ import annotations

JOBS_SUBDIR = "jobs"
RECORD = "job.json"
LOG = "log.txt"
# How often the driver copies its log and rewrites the record: a cluster lost without warning
# loses at most this much of the history.
HISTORY_EVERY_S = 15.0
# Where a record lies under the bucket's root: <root>/<run>/jobs/<id>/job.json.
RECORD_GLOB = f"*/{JOBS_SUBDIR}/*/{RECORD}"


def job_dir(run_dir: str, submission_id: str) -> str:
    return f"{run_dir.rstrip('/')}/{JOBS_SUBDIR}/{submission_id}"
