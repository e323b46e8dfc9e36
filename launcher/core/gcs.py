"""Cloud Storage for the workstation's and the cluster's code alike, and the only module that
reaches it: what `--bucket` names (one parse for every command), gs:// URLs, listing, and the
storage client with the job's own credentials (Workload Identity in the cluster, a user's
application-default login on a workstation), or anonymous against an emulator where
STORAGE_EMULATOR_HOST names one (tests)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from launcher.core.errors import UsageError

# Cloud Storage's bucket names (https://cloud.google.com/storage/docs/buckets#naming): lowercase
# letters, digits, dashes, underscores and dots, starting and ending with a letter or digit, 3
# to 63 characters (222 with dots).
_NAME = r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]"
_URL = re.compile(rf"gs://({_NAME})(/.*)?")
_BARE = re.compile(_NAME)
NAMING = "https://cloud.google.com/storage/docs/buckets#naming"
# What --bucket takes, in every command's help and refusal.
BUCKET_FORMS = "BUCKET or gs://BUCKET[/prefix]"


@dataclass(frozen=True)
class Bucket:
    """What `--bucket` names in every command: a bucket in Cloud Storage, and the prefix in it
    under which the command reads or checks (empty: the bucket's root). The bucket as a machine
    sees it (a gcsfuse mount, the local cluster's directory) is a directory, `--data-dir`."""

    name: str
    prefix: str = ""

    @property
    def url(self) -> str:
        return f"gs://{self.name}/{self.prefix}" if self.prefix else f"gs://{self.name}"

    def __str__(self) -> str:
        return self.url


def parse_bucket(text: str, field: str = "--bucket", *, prefix: bool = True) -> Bucket:
    """BUCKET, gs://BUCKET or (where `prefix`) gs://BUCKET/some/prefix; a directory, a name
    Cloud Storage refuses, or a prefix where the command takes a whole bucket is refused."""
    m = _URL.fullmatch(text)
    if m is None:
        bare, directory = _BARE.fullmatch(text) is not None, os.path.isdir(text)
        if bare and not directory:
            return Bucket(text)
        if directory or text.startswith((".", "/", "~")) or "/" in text:
            raise UsageError(
                field,
                f"{text!r} is a path: {field} names a bucket in Cloud Storage ({BUCKET_FORMS})",
                (f"gs://{text} names the bucket of that name; " if bare else "")
                + "where the command reads the bucket as this machine sees it (a gcsfuse mount, "
                f"the local cluster's bucket directory), pass that directory as --data-dir {text}",
            )
        raise UsageError(
            field,
            f"{text!r} is not a Cloud Storage bucket name (lowercase letters, digits, -, _ and "
            f"., starting and ending with a letter or digit, 3-63 characters; {NAMING})",
            f"pass {BUCKET_FORMS}",
        )
    bucket = Bucket(m[1], (m[2] or "").strip("/"))
    if bucket.prefix and not prefix:
        raise UsageError(
            field,
            f"{text!r} names a prefix in the bucket; here {field} is a whole bucket (the "
            "release mounts it on every host)",
            f"pass the bucket alone: {bucket.name}",
        )
    return bucket


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


def child_prefixes(client: Any, bucket: str, prefix: str) -> list[str]:
    """The "directories" right under `prefix` (each ending in /), sorted."""
    found = client.list_blobs(bucket, prefix=prefix, delimiter="/")
    list(found)  # the iterator fills .prefixes as it pages
    return sorted(found.prefixes)


def has_storage_client() -> bool:
    """Whether google-cloud-storage is installed (asked without importing it)."""
    from importlib.util import find_spec

    try:
        return find_spec("google.cloud.storage") is not None
    except ModuleNotFoundError:  # not even the google namespace
        return False


def storage_client_for(field: str, fallback: str) -> Any:
    """storage_client(), or where google-cloud-storage is not installed a UsageError on `field`
    with the install line and `fallback` (what to pass instead)."""
    try:
        return storage_client()
    except ImportError:
        from launcher.core.package_version import pip_install

        raise UsageError(
            field, "reading gs:// needs google-cloud-storage", f"{pip_install('gcs')}, {fallback}"
        ) from None


def storage_client() -> Any:  # a google.cloud.storage.Client
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        anonymous = AnonymousCredentials()  # type: ignore[no-untyped-call]
        return storage.Client(project="emulated", credentials=anonymous)
    return storage.Client()
