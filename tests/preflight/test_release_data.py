"""A RayJob release's `--data`, checked against the release's own bucket (the GCS emulator here,
the bucket the rendered RayJob mounts) before `install` sends anything: a misspelt dataset is
refused naming those the bucket holds; a real one is planned with its manifest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.helm import render
from harness.paths import REPO
from launcher.client.jobs.rayjob_check import check_rayjobs
from launcher.core.errors import UsageError
from launcher.core.release_facts import BucketMount, ReleaseFacts

pytestmark = pytest.mark.preflight


def rayjob(*job_args: str) -> list[dict]:
    """A RayJob release of values/v6e-16.yaml over the bucket `ckpt`, running `job_args`."""
    args = ",".join(f'"{a}"' for a in job_args)
    return render(
        REPO / "values" / "v6e-16.yaml",
        "--set", "ray.job.enabled=true", "--set", "global.gcsfuse.bucketName=ckpt",
        "--set-json", f"ray.job.args=[{args}]",
    )  # fmt: skip


@pytest.fixture
def bucket_with_tiny(storage, tmp_path: Path):
    """The bucket `ckpt` holding the project's tiny corpus, prepared as `data prepare` does."""
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "data", "prepare", "--name", "tiny",
         "--output-dir", str(tmp_path), "--no-progress"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    bucket = storage.bucket("ckpt")
    for path in (tmp_path / "datasets").rglob("*"):
        if path.is_file():
            bucket.blob(str(path.relative_to(tmp_path))).upload_from_filename(str(path))
    return bucket


def test_the_rendered_rayjob_names_its_bucket_and_mount():
    (doc,) = [d for d in rayjob("tiny-llama.yml", "run_name=r") if d["kind"] == "RayJob"]
    facts = ReleaseFacts.of_cluster_spec(doc["spec"]["rayClusterSpec"], "the RayJob")
    assert facts is not None and facts.bucket == BucketMount("ckpt", "/data")


def test_a_misspelt_dataset_is_refused_before_install_naming_the_buckets(bucket_with_tiny):
    with pytest.raises(UsageError) as e:
        check_rayjobs(rayjob("--data=tinny", "tiny-llama.yml", "run_name=r", "steps=2"))
    assert e.value.field == "ray.job.args: --data"
    assert "no prepared dataset 'tinny'" in e.value.problem
    assert "gs://ckpt/datasets/tinny/manifest.json" in e.value.problem
    assert e.value.fix.startswith("one it holds: tiny;")


def test_a_prepared_dataset_is_planned_from_its_manifest(bucket_with_tiny, capsys):
    check_rayjobs(rayjob("--data=tiny", "tiny-llama.yml", "run_name=r", "steps=2"))
    assert "--data=tiny: its manifest read from gs://ckpt/datasets/tiny/manifest.json" in (
        capsys.readouterr().out
    )


def test_an_unreadable_bucket_leaves_the_check_to_the_head(monkeypatch, capsys):
    """No emulator and no credentials: said, and the install goes on (the head checks)."""
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/credentials.json")
    check_rayjobs(rayjob("--data=tiny", "tiny-llama.yml", "run_name=r", "steps=2"))
    out = capsys.readouterr().out
    assert "note: --data=tiny is checked on the job's head, not here (could not read" in out
