"""The session's local Ray cluster: started here unless one already runs (`make up`).

Started with two simulated slices: a one-slice job takes one of them, and the elastic test
needs both (restarting the cluster for it alone costs minutes)."""

from __future__ import annotations

import pytest

from tests.support.local_ray import LocalCluster, local_cluster_command

SLICES = 2


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory) -> LocalCluster:
    bucket = tmp_path_factory.mktemp("bucket")
    running = local_cluster_command("local-status", check=False).returncode == 0
    if not running:
        up = local_cluster_command(
            "up", "--bucket-dir", str(bucket), "--num-slices", str(SLICES), check=False
        )
        assert up.returncode == 0, up.stdout + up.stderr
    yield LocalCluster(bucket, started_here=not running)
    if not running:
        local_cluster_command("down", check=False)
