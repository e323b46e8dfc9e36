"""gcp-storage-emulator on 127.0.0.1, the real GCS JSON API as the google-cloud-storage client
speaks it: one per module, with a bucket named ckpt."""

from __future__ import annotations

import pytest

from harness.gcs_emulator import gcs_emulator


@pytest.fixture(scope="module")
def emulator():
    with gcs_emulator("ckpt") as url:
        yield url


@pytest.fixture
def storage(emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator)
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs

    return gcs.Client(project="test", credentials=AnonymousCredentials())
