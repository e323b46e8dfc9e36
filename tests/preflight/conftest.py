"""gcp-storage-emulator on 127.0.0.1, the real GCS JSON API as the google-cloud-storage client
speaks it: one per module, with a bucket named ckpt."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from launcher.core.child_process import ends_with_this_process


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def emulator():
    port = _free_port()
    exe = Path(sys.executable).parent / "gcp-storage-emulator"
    proc = subprocess.Popen(
        ends_with_this_process(
            [
                str(exe),
                "start",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--in-memory",
                "--default-bucket",
                "ckpt",
                "-q",
            ]
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{url}/storage/v1/b/ckpt", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def storage(emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator)
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs

    return gcs.Client(project="test", credentials=AnonymousCredentials())
