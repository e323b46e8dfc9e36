"""The bucket preflight against gcp-storage-emulator on 127.0.0.1 (the real GCS JSON API as the
google-cloud-storage client speaks it)."""

from __future__ import annotations

import http.server
import threading
import urllib.request

import pytest

from launcher.core.errors import UsageError
from launcher.core.gcs import parse_bucket
from launcher.preflight.bucket_check import check_bucket

pytestmark = pytest.mark.preflight


def test_an_existing_writable_bucket_passes_and_names_the_resume_step(storage):
    bucket = storage.bucket("ckpt")
    # Checkpoints as Orbax leaves them on GCS: committed steps carry commit_success.txt;
    # step 20 was interrupted mid-save and has none.
    for name in (
        "runs/r1/checkpoints/0/commit_success.txt",
        "runs/r1/checkpoints/10/commit_success.txt",
        "runs/r1/checkpoints/10/items/manifest.ocdbt",
        "runs/r1/checkpoints/20/items/manifest.ocdbt",
    ):
        bucket.blob(name).upload_from_string(b"x")
    report = check_bucket(parse_bucket("gs://ckpt/runs"), "r1")
    assert report.latest_checkpoint == 10
    assert "resume from checkpoint 10" in report.render()
    assert not [b.name for b in storage.list_blobs("ckpt", prefix="runs/r1/.preflight")]
    assert check_bucket(parse_bucket("gs://ckpt/runs"), "fresh").latest_checkpoint is None
    # The bucket named bare, as install names it: the run's prefix from the bucket's root.
    assert check_bucket(parse_bucket("ckpt"), "runs/r1").latest_checkpoint == 10


def test_a_missing_bucket_is_named(storage):
    with pytest.raises(UsageError, match="bucket no-such-bucket does not exist"):
        check_bucket(parse_bucket("no-such-bucket"), "r")


class _ReadOnlyGcs(http.server.BaseHTTPRequestHandler):
    """FAKE of GCS IAM (the emulator has no permissions): forwards reads to the emulator and
    answers uploads with the 403 that GCS gives an identity holding only objectViewer."""

    upstream = ""

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        req = urllib.request.Request(
            self.upstream + self.path, data=body or None, method=self.command
        )
        with urllib.request.urlopen(req) as resp:
            data = resp.read()
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.headers.get("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        if self.path.startswith("/upload/"):
            self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
            data = (
                b'{"error": {"code": 403, "message": "does not have '
                b'storage.objects.create access"}}'
            )
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._forward()

    def log_message(self, *args) -> None:
        pass


def test_a_read_only_prefix_is_reported_with_the_role_to_grant(emulator, monkeypatch):
    _ReadOnlyGcs.upstream = emulator
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ReadOnlyGcs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{server.server_port}")
    try:
        with pytest.raises(
            UsageError,
            match=r"(?s)cannot write or list under gs://ckpt/runs.*"
            r"roles/storage.objectUser",
        ):
            check_bucket(parse_bucket("gs://ckpt/runs"), "r1")
    finally:
        server.shutdown()


def test_data_prepare_into_a_bucket_sends_the_manifest_last_and_resumes(
    storage, tmp_path, monkeypatch
):
    """`tpu-launcher data prepare --output-dir gs://...`: prepared in a staging directory, then
    uploaded; a rerun sends nothing again; an upload cut short leaves no manifest."""
    from launcher.cli import main
    from launcher.client.data import upload as data_upload
    from launcher.core.data.datasets import Manifest

    monkeypatch.chdir(tmp_path)  # the staging directory is the working directory's .local
    argv = ["data", "prepare", "--name", "tiny", "--output-dir", "gs://ckpt/team", "--no-progress"]
    real_upload = data_upload.storage_client

    class CutAfterTwo:  # the network going away after two files
        def __init__(self):
            self.client = real_upload()

        def bucket(self, name):
            bucket = self.client.bucket(name)
            real_blob = bucket.blob
            sent = []

            def blob(path):
                b = real_blob(path)
                real_send = b.upload_from_filename

                def send(filename):
                    if len(sent) == 2:
                        raise ConnectionError("network gone")
                    real_send(filename)
                    sent.append(path)

                b.upload_from_filename = send
                return b

            bucket.blob = blob
            return bucket

    monkeypatch.setattr(data_upload, "storage_client", CutAfterTwo)
    with pytest.raises(ConnectionError):
        main(argv)
    names = {b.name for b in storage.list_blobs("ckpt", prefix="team/datasets/tiny/")}
    assert len(names) == 2 and "team/datasets/tiny/manifest.json" not in names
    monkeypatch.setattr(data_upload, "storage_client", real_upload)
    assert main(argv) == 0
    names = {b.name for b in storage.list_blobs("ckpt", prefix="team/datasets/tiny/")}
    manifest = Manifest.from_json(
        storage.bucket("ckpt").blob("team/datasets/tiny/manifest.json").download_as_text()
    )
    assert {f"team/datasets/tiny/{s}" for s in manifest.train.shards} <= names
    assert "team/datasets/tiny/tokenizer/tokenizer.json" in names
    assert (
        data_upload.upload(data_upload.staging_dir("gs://ckpt/team"), "gs://ckpt/team", "tiny") == 0
    )
