"""gcp-storage-emulator on 127.0.0.1: the GCS JSON API as the google-cloud-storage client speaks
it (a stand-in for Cloud Storage, which cannot run here), in memory, with one bucket."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from launcher.core.child_process import ends_with_this_process


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def gcs_emulator(bucket: str = "ckpt") -> Iterator[str]:
    """Yields the emulator's URL (what STORAGE_EMULATOR_HOST takes), its bucket made."""
    port = _free_port()
    exe = Path(sys.executable).parent / "gcp-storage-emulator"
    command = [str(exe), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"]
    proc = subprocess.Popen(
        ends_with_this_process([*command, "--default-bucket", bucket, "-q"]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/storage/v1/b/{bucket}", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
