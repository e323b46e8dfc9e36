"""`--bucket` means one thing in every command that takes it: a bucket in Cloud Storage, named
BUCKET or gs://BUCKET[/prefix], parsed once (launcher.core.gcs.parse_bucket). A directory is
refused with the option that takes one (--data-dir); a prefix where the command takes a whole
bucket (install, gke: the release mounts it) is refused with the bucket alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from harness.paths import REPO
from launcher.core import gcs
from launcher.core.errors import UsageError
from launcher.core.gcs import Bucket, parse_bucket

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "bucket"),
    [
        ("my-ckpts", Bucket("my-ckpts")),
        ("gs://my-ckpts", Bucket("my-ckpts")),
        ("gs://my-ckpts/", Bucket("my-ckpts")),
        ("gs://my-ckpts/team/runs/", Bucket("my-ckpts", "team/runs")),
        ("gs://a.b_c-d", Bucket("a.b_c-d")),
    ],
)
def test_a_bucket_is_named_bare_or_as_a_url(text, bucket):
    assert parse_bucket(text) == bucket
    assert parse_bucket(bucket.url) == bucket  # its URL names it again


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("./bucket", "is a path: --bucket names a bucket in Cloud Storage"),
        ("/mnt/ckpts", "pass that directory as --data-dir /mnt/ckpts"),
        ("my-ckpts/team", "is a path"),
        ("My-Ckpts", "is not a Cloud Storage bucket name"),
        ("ab", "is not a Cloud Storage bucket name"),
        ("s3://ckpt/x", "is a path"),
    ],
)
def test_what_is_not_a_bucket_is_refused_saying_what_would_be(text, refusal):
    with pytest.raises(UsageError) as e:
        parse_bucket(text)
    assert e.value.field == "--bucket" and refusal in str(e.value)


def test_an_existing_directory_named_like_a_bucket_is_not_taken_for_one(tmp_path, monkeypatch):
    (tmp_path / "bucket").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        UsageError, match=r"gs://bucket names the bucket of that name.*--data-dir bucket"
    ):
        parse_bucket("bucket")
    assert parse_bucket("gs://bucket") == Bucket("bucket")


def test_a_prefix_is_refused_where_a_whole_bucket_is_mounted():
    with pytest.raises(UsageError, match="pass the bucket alone: my-ckpts"):
        parse_bucket("gs://my-ckpts/team", prefix=False)
    assert parse_bucket("gs://my-ckpts", prefix=False) == Bucket("my-ckpts")


def test_the_bucket_names_pattern_is_the_charts():
    """The chart's schema is where the release's bucket name is checked (its refusals add the
    rules a pattern cannot say); the client's parse takes the same names."""
    schema = json.loads((REPO / "charts/tpu-stack/values.schema.json").read_text())
    pattern = schema["properties"]["global"]["properties"]["gcsfuse"]["properties"]["bucketName"]
    assert pattern["pattern"] == f"^({gcs._NAME})?$"


def _launcher(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args], capture_output=True, text=True, cwd=REPO
    )


def test_every_command_that_takes_a_bucket_refuses_a_path_alike(tmp_path):
    """install/gke (a whole bucket), preflight (a bucket to check) and the history readers:
    the same refusal from the same parse, before anything else is done."""
    where = ("--project=p", "--cluster=c", "--location=us-east5-b")
    for argv in (
        ("gke", "plan", "--values", "v6e-16", *where, f"--bucket={tmp_path}"),
        ("list", f"--bucket={tmp_path}"),
        ("status", "some-job", f"--bucket={tmp_path}"),
        ("preflight", "--values", "v6e-16", f"--bucket={tmp_path}"),
    ):
        done = _launcher(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert re.search(rf"--bucket: '{re.escape(str(tmp_path))}' is a path", done.stderr), (
            argv,
            done.stderr,
        )
