"""The workstation's own files, all under one directory of the project a command runs in
(`.local/`, which job shipments skip): named here once.

The client's state (the last submission, the jobs' full logs) moves with LAUNCHER_STATE_DIR
(the tests give each session its own); the local cluster's bucket, the datasets staged on their
way to a bucket and the files `gke` writes stay with the project."""

from __future__ import annotations

import os
from pathlib import Path

WORKSPACE = ".local"
STATE_DIR_ENV = "LAUNCHER_STATE_DIR"

LOCAL_BUCKET = f"{WORKSPACE}/bucket"  # the local cluster's bucket, relative to where `up` runs
DATA_STAGING = Path(WORKSPACE) / "data-staging"  # datasets prepared before they are sent
GKE_FILES = f"{WORKSPACE}/gke"  # node pools' system configurations, for gcloud to read
PACKAGED_CHARTS = f"{WORKSPACE}/charts"  # `helm package`'s, on the way to the registry


def state_dir() -> Path:
    """The client's state: the last submission and the jobs' full logs."""
    return Path(os.environ.get(STATE_DIR_ENV, WORKSPACE))
