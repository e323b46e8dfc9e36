"""The session's local Ray cluster: started here unless one already runs (`make up`).

It has one simulated slice (a job takes every slice the cluster has); the elastic test needs
two and restarts it with two, so it runs after the other end-to-end tests."""

from __future__ import annotations

import pytest

from tests.support.local_ray import LocalCluster, local_cluster_command

LAST = "test_elastic_slices.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name == LAST)  # stable: the rest keep their order


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory) -> LocalCluster:
    bucket = tmp_path_factory.mktemp("bucket")
    running = local_cluster_command("local-status", check=False).returncode == 0
    if not running:
        up = local_cluster_command("up", "--bucket-dir", str(bucket), check=False)
        assert up.returncode == 0, up.stdout + up.stderr
    yield LocalCluster(bucket, started_here=not running)
    if not running:
        local_cluster_command("down", check=False)
