"""A prepared dataset into the bucket (`data prepare --output-dir gs://BUCKET[/prefix]`): prepared
first in a local staging directory (resumable as any prepare), then uploaded file by file with
the manifest last, so the bucket holds a complete dataset or none that looks complete. A file
already in the bucket with the same size and MD5 is not sent again: an upload cut short resumes.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from launcher.client.data.prepare import STATE
from launcher.client.workspace import DATA_STAGING
from launcher.core.data.datasets import DATASETS_SUBDIR, MANIFEST
from launcher.core.errors import UsageError
from launcher.core.gcs import split_url, storage_client

STAGING = DATA_STAGING


def staging_dir(url: str) -> Path:
    """Where a bucket's datasets are prepared before they are sent (one per bucket and prefix)."""
    bucket, prefix = split_url(url)
    return STAGING / bucket / prefix


def upload(local: Path, url: str, name: str) -> int:
    """Sends local/datasets/NAME to url/datasets/NAME; returns the files sent."""
    from google.api_core import exceptions as gexc

    bucket_name, prefix = split_url(url)
    source = local / DATASETS_SUBDIR / name
    target = "/".join(p for p in (prefix, DATASETS_SUBDIR, name) if p)
    files = sorted(p for p in source.rglob("*") if p.is_file() and STATE not in p.name)
    files.sort(key=lambda p: p.name == MANIFEST)  # the manifest last: complete from then on
    try:
        bucket = storage_client().bucket(bucket_name)
        sent = 0
        for path in files:
            blob = bucket.blob(f"{target}/{path.relative_to(source).as_posix()}")
            if _same(blob, path):
                continue
            blob.upload_from_filename(str(path))
            sent += 1
        return sent
    except gexc.NotFound:
        raise UsageError(
            field="--output-dir",
            problem=f"bucket {bucket_name} does not exist",
            fix="make it (tpu-launcher gke up does) or check the name",
        ) from None
    except gexc.Forbidden as e:
        raise UsageError(
            field="--output-dir",
            problem=f"not allowed to write {url} ({e.message})",
            fix="run `gcloud auth application-default login` as an account with "
            "roles/storage.objectUser on the bucket; what was sent stays, a rerun resumes",
        ) from None


def _same(blob, path: Path) -> bool:  # blob: a Cloud Storage Blob
    if not blob.exists():
        return False
    blob.reload()
    digest = base64.b64encode(hashlib.md5(path.read_bytes()).digest()).decode()
    return blob.size == path.stat().st_size and blob.md5_hash == digest
