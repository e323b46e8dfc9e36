"""Bucket preflight: the checkpoint bucket exists, the job's identity can write and list under
the run's prefix, and which checkpoint a run would resume from. Uses google-cloud-storage with
the job's own credentials (Workload Identity in the cluster, STORAGE_EMULATOR_HOST in tests)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from launcher.core.errors import UsageError
from launcher.core.gcs import Bucket, storage_client
from launcher.core.job.checkpoints import committed_steps_in_listing
from launcher.core.job.run_dir import CHECKPOINTS_SUBDIR


@dataclass
class BucketReport:
    url: str
    latest_checkpoint: int | None

    def render(self) -> str:
        resume = (
            f"a run would resume from checkpoint {self.latest_checkpoint}"
            if self.latest_checkpoint is not None
            else "no checkpoint yet: a run starts at 0"
        )
        return f"preflight: {self.url} exists, is writable and listable; {resume}"


def check_bucket(where: Bucket, run_name: str = "") -> BucketReport:
    from google.api_core import exceptions as gexc

    bucket_name, url = where.name, where.url
    run_prefix = "/".join(p for p in (where.prefix, run_name) if p)
    client = storage_client()
    try:
        bucket = client.lookup_bucket(bucket_name)
    except gexc.Forbidden as e:
        raise UsageError(
            "--bucket",
            f"the job's identity may not read bucket {bucket_name} ({e})",
            "grant its Google service account roles/storage.objectUser on the "
            "bucket (Workload Identity: ray.serviceAccount.gcpServiceAccount)",
        ) from None
    if bucket is None:
        raise UsageError(
            "--bucket",
            f"bucket {bucket_name} does not exist",
            f"create it (gcloud storage buckets create gs://{bucket_name}) or fix "
            "global.gcsfuse.bucketName",
        )
    probe = bucket.blob(f"{run_prefix}/.preflight-{uuid.uuid4().hex}".lstrip("/"))
    try:
        probe.upload_from_string(b"preflight")
        list(client.list_blobs(bucket_name, prefix=run_prefix, max_results=1))
        probe.delete()
    except gexc.Forbidden as e:
        raise UsageError(
            "--bucket",
            f"the job's identity cannot write or list under {url} ({e})",
            "grant its Google service account roles/storage.objectUser on the "
            "bucket, not only objectViewer",
        ) from None
    return BucketReport(
        url=f"gs://{bucket_name}/{run_prefix}",
        latest_checkpoint=latest_checkpoint(client, bucket_name, run_prefix),
    )


def latest_checkpoint(client, bucket_name: str, run_prefix: str) -> int | None:
    """The newest committed step under <run>/checkpoints (launcher.core.job.checkpoints' rule)."""
    ckpt = f"{run_prefix}/{CHECKPOINTS_SUBDIR}/".lstrip("/")
    names = (blob.name for blob in client.list_blobs(bucket_name, prefix=ckpt))
    steps = committed_steps_in_listing(names, run_prefix)
    return steps[-1] if steps else None
