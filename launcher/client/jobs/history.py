"""`list`, `logs` and `status` with `--bucket` or `--data-dir`: a job's history as its driver
wrote it into the run's directory (launcher.core.job.history), read without the Ray cluster,
which may be gone (a RayJob's is, once it ended). The bucket is named as every command names it
(`--bucket BUCKET` or `gs://BUCKET[/prefix]`, read with google-cloud-storage, the gcs extra), or
given as this machine sees it (`--data-dir`: the local cluster's directory, a gcsfuse mount)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.core.errors import UsageError
from launcher.core.gcs import Bucket, child_prefixes, parse_bucket, split_url, storage_client_for
from launcher.core.job.history import JOBS_SUBDIR, LOG, RECORD, RECORD_GLOB
from launcher.core.job.record import RUNNING, JobRecord


@dataclass(frozen=True)
class Recorded:
    """One job's record, and where it lies."""

    where: str  # the job's directory: a path, or a gs:// URL
    record: dict[str, Any]  # job.json: the job's record and the history's own keys

    @property
    def job(self) -> JobRecord:
        return JobRecord.from_json(self.record)


def history_at(bucket: str | None, data_dir: str | None) -> BucketHistory | None:
    """The history `--bucket` or `--data-dir` names; None where neither is given."""
    if bucket:
        return BucketHistory(parse_bucket(bucket))
    if data_dir:
        return BucketHistory(Path(data_dir))
    return None


class BucketHistory:
    def __init__(self, root: Bucket | Path):
        self.bucket = root if isinstance(root, Bucket) else None
        self.root = str(root).rstrip("/")
        if isinstance(root, Path) and not root.is_dir():
            raise UsageError(
                "--data-dir",
                f"{str(root)!r} is not a directory",
                "pass the bucket as this machine sees it (the local cluster's bucket "
                "directory, a gcsfuse mount), or name the bucket itself: --bucket BUCKET",
            )

    @property
    def flag(self) -> str:
        """The option this history was named by: --bucket, or --data-dir for a directory."""
        return "--bucket" if self.bucket is not None else "--data-dir"

    @property
    def option(self) -> str:
        """The option that reads this history again, for the lines that suggest a command."""
        return f"{self.flag} {self.root}"

    def jobs(self) -> list[Recorded]:
        """Every job recorded under the root, newest first."""
        if self.bucket is not None:
            found = [
                Recorded(url.rsplit("/", 1)[0], json.loads(text))
                for url, text in _gcs_records(self.bucket)
            ]
        else:
            found = [
                Recorded(str(path.parent), json.loads(path.read_text()))
                for path in Path(self.root).glob(RECORD_GLOB)
            ]
        return sorted(found, key=lambda r: r.job.started_at or 0, reverse=True)

    def job(self, job_id: str) -> Recorded:
        for recorded in self.jobs():
            if recorded.job.job_id == job_id:
                return recorded
        raise UsageError(
            "job",
            f"no job {job_id!r} recorded under {self.root} (<run>/{JOBS_SUBDIR}/<id>/{RECORD})",
            f"list the recorded jobs with `tpu-launcher list {self.option}`; a job's "
            "history is written by launchers from this version on",
        )

    def log(self, recorded: Recorded) -> str:
        if self.bucket is not None:
            return _gcs_read(f"{recorded.where}/{LOG}")
        path = Path(recorded.where) / LOG
        return path.read_text(errors="replace") if path.is_file() else ""


def _storage() -> Any:
    return storage_client_for("--bucket", "or pass the bucket's gcsfuse mount as --data-dir")


def _gcs_records(root: Bucket) -> list[tuple[str, str]]:
    """(the record's gs:// URL, its text) for every <run>/jobs/<id>/job.json under root."""
    bucket_name = root.name
    client = _storage()
    base = f"{root.prefix}/" if root.prefix else ""
    found = []
    for run in child_prefixes(client, bucket_name, base):
        for blob in client.list_blobs(bucket_name, prefix=f"{run}{JOBS_SUBDIR}/"):
            if blob.name.endswith(f"/{RECORD}") and blob.name.count("/") == run.count("/") + 2:
                found.append((f"gs://{bucket_name}/{blob.name}", blob.download_as_text()))
    return found


def _gcs_read(url: str) -> str:
    bucket_name, name = split_url(url)
    blob = _storage().bucket(bucket_name).blob(name)
    return blob.download_as_text() if blob.exists() else ""


def source_line(where: str) -> str:
    return f"from the bucket's history: {where} (the Ray cluster is not asked)"


def state_of(recorded: Recorded) -> str:
    """The recorded state; a RUNNING record no longer written says when it last was."""
    state = recorded.job.state
    if state == RUNNING and (at := recorded.record.get("updated_at")):
        return (
            f"RUNNING as last recorded {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(at))}"
            " (a cluster lost mid-job leaves it so)"
        )
    return state


def act_on_recorded(
    command: str,
    job_id: str,
    history: BucketHistory,
    raw: bool,
    as_json: bool,
    show_log: Callable[[str, str, bool], int],
) -> int:
    """`logs` or `status` of a job from its history; `show_log(job_id, text, raw)` shows a
    log as `logs` does."""
    from launcher.core.job.goodput import format_breakdown
    from launcher.core.tpu.prices import format_cost

    recorded = history.job(job_id)
    if command == "logs":
        print(source_line(recorded.where), file=sys.stderr)
        return show_log(job_id, history.log(recorded), raw)
    if as_json:
        print(json.dumps({**recorded.job.to_json(), "source": recorded.where}, indent=2))
        return 0
    print(source_line(recorded.where))
    if recorded.job.goodput:
        print("\n".join(format_breakdown(recorded.job.goodput)))
    if recorded.job.devices:
        print(recorded.job.devices["line"])
    if recorded.job.cost:
        print(format_cost(recorded.job.cost))
    print(f"job {job_id}: {state_of(recorded)}")
    return 0
