"""gs:// URLs and the storage client, for the workstation's and the cluster's code alike: the
job's own credentials (Workload Identity in the cluster, a user's application-default login on
a workstation), or anonymous against an emulator where STORAGE_EMULATOR_HOST names one (tests)."""

from __future__ import annotations

import os
import re
from typing import Any

from launcher.core.errors import UsageError

# Cloud Storage's bucket names (https://cloud.google.com/storage/docs/buckets#naming), then an
# optional prefix.
_URL = re.compile(r"gs://([a-z0-9][a-z0-9._-]{1,220}[a-z0-9])(/.*)?")


def is_gcs_url(text: str) -> bool:
    return text.startswith("gs://")


def split_url(url: str, field: str = "bucket") -> tuple[str, str]:
    """gs://BUCKET/some/prefix -> ("BUCKET", "some/prefix")."""
    m = _URL.fullmatch(url)
    if not m:
        raise UsageError(
            field,
            f"{url!r} is not a gs://bucket[/prefix] URL",
            "pass gs://my-bucket/some/prefix",
        )
    return m[1], (m[2] or "/").strip("/")


def storage_client() -> Any:  # a google.cloud.storage.Client
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        anonymous = AnonymousCredentials()  # type: ignore[no-untyped-call]
        return storage.Client(project="emulated", credentials=anonymous)
    return storage.Client()
