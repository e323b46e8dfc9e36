"""The session's local Ray cluster, in the suite's own slot (tests/conftest.py: its own ports and
Ray directory, beside any cluster a user started): started here unless the slot's cluster
already runs (`LAUNCHER_LOCAL_SLOT=1 tpu-launcher up`).

It has one simulated slice (a job takes every slice the cluster has); the Ironwood test restarts
it as a tpu7x-16 and the elastic test with two slices, so they run after the other end-to-end
tests, in that order; the history test between them reads a job of the cluster the first one
stopped."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.job_control import jobs_client, wait_until_done
from harness.local_ray import LocalCluster, local_cluster_command, run_name, tpu_launcher
from harness.paths import REPO
from launcher.client.jobs.ray_api import ENDED, RayJobsError
from launcher.client.local import prometheus as local_prometheus
from launcher.core.data.datasets import MANIFEST, Manifest

# The modules that restart the cluster with another shape (and the one that reads a stopped
# cluster's job), in the order they run, last.
LAST = ("test_ironwood_slice.py", "test_job_history.py", "test_elastic_slices.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Stable: the rest keep their order, first.
    items.sort(key=lambda item: LAST.index(item.path.name) + 1 if item.path.name in LAST else 0)


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory) -> LocalCluster:
    bucket = tmp_path_factory.mktemp("bucket")
    running = local_cluster_command("local", "status", check=False).returncode == 0
    if not running:
        up = local_cluster_command("up", "--bucket-dir", str(bucket), check=False)
        assert up.returncode == 0, up.stdout + up.stderr
    # Prometheus scrapes from before the first job: a finished process's gauges leave Ray's
    # agents about 20 s after it (the metrics test reads the session's jobs back from it).
    scraping = local_prometheus.is_ready()
    if not scraping:
        _start_prometheus(tmp_path_factory.mktemp("prometheus"))
    yield LocalCluster(bucket, started_here=not running)
    if not scraping:
        local_prometheus.down()
    if not running:
        local_cluster_command("down", check=False)


@pytest.fixture(autouse=True)
def no_job_left_running(request) -> Iterator[None]:
    """A test that fails while its job runs leaves that job running: stopped here, after the
    test, so that it does not hold the shared cluster's CPUs through every later test (a job of
    400 steps, left running by a failed wait, slowed the rest of a CI run's tier)."""
    yield
    if "local_cluster" not in request.fixturenames:
        return
    client = jobs_client()
    try:
        running = [j.submission_id for j in client.jobs() if j.status not in ENDED]
    except (OSError, RayJobsError):
        return  # the cluster is down (a module restarts it with another shape)
    for job_id in filter(None, running):
        client.stop(job_id)
        wait_until_done(client, job_id, timeout=120)


def _start_prometheus(data_dir: Path) -> None:
    """The pinned Prometheus (unpacked into .tools once), as `tpu-launcher up --prometheus`."""
    found = subprocess.run(
        [str(REPO / "ci" / "install-prometheus.sh")], capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    os.environ.setdefault("PROMETHEUS", str(Path(found.stdout.strip()) / "prometheus"))
    local_prometheus.up(data_dir)


@dataclass(frozen=True)
class TrainedRun:
    """A run `tpu-launcher submit` trained: its name, directory and what submit printed."""

    name: str
    dir: Path
    code: int
    output: str


# The project's own corpus (launcher/corpus), prepared once into the session's bucket: the
# trained run, the killed host and the preemption train on it.
DATASET = "tiny"
PRICE = 2.0  # USD per chip-hour, stated for the trained run: its cost is checked against it


@pytest.fixture(scope="session")
def tiny_dataset(local_cluster: LocalCluster) -> Manifest:
    done = tpu_launcher(
        "data", "prepare", "--name", DATASET, "--output-dir", str(local_cluster.bucket),
        "--no-progress", timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return Manifest.from_json((local_cluster.bucket / "datasets" / DATASET / MANIFEST).read_text())


@pytest.fixture(scope="session")
def trained_run(local_cluster: LocalCluster, tiny_dataset: Manifest) -> TrainedRun:
    """The tiny model trained 10 steps on the tiny corpus (checkpoints 0, 5 and 9; held-out loss
    after steps 0, 3, 6 and 9), once per session, at a stated price per chip-hour: the train
    test checks this run and then resumes it; the generate test generates and exports from it.
    (Each training its own cost a CI run about two minutes.)"""
    name = run_name("e2e")
    code, out = local_cluster.submit(
        f"--data={DATASET}", f"--price_per_chip_hour={PRICE}", "tiny-llama.yml",
        f"run_name={name}", "steps=10", "eval_interval=3", "eval_steps=2",
    )  # fmt: skip
    return TrainedRun(name, local_cluster.bucket / name, code, out)
