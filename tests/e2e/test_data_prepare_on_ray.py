"""`data prepare --address`: the preparation as a Ray job on the session's local cluster, Ray Data
over its nodes, gives the dataset the workstation's path gives (the same shards, byte for byte,
and the same manifest checksum) with one task at a time and with four; a corpus in Cloud Storage
(the GCS emulator: a stand-in, Cloud Storage cannot run here) is read and written there, nothing
of it on this machine's disk, and a second run does nothing; a job stopped midway resumes at its
first unfinished shard; and the tasks keep off the simulated TPU slice's hosts unless told.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.gcs_emulator import gcs_emulator
from harness.local_ray import LocalCluster, tpu_launcher
from harness.paths import REPO
from launcher.client.jobs.ray_api import default_address
from launcher.client.workspace import DATA_STAGING
from launcher.core.child_process import ends_with_this_process
from launcher.core.data.datasets import DATASETS_SUBDIR, MANIFEST, SPLITS, Manifest
from launcher.corpus import TINY

pytestmark = pytest.mark.e2e

SHARD_MB = "0.004"  # about 4 kB of text a shard: some 60 shards from this corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The shipped corpus, a file repeating some of it (duplicates), and a Parquet file."""
    src = tmp_path_factory.mktemp("corpus")
    shutil.copytree(TINY, src / "notes")
    lines = (TINY / "notes-0.jsonl").read_text().splitlines()
    (src / "again.jsonl").write_text("\n".join(lines[:50]) + "\n")
    texts = [json.loads(line)["text"] for line in lines[100:160]]
    pq.write_table(pa.table({"text": [*texts, "   "]}), src / "rows.parquet")
    return src


@pytest.fixture(scope="module")
def here(corpus, tmp_path_factory) -> tuple[Manifest, Path]:
    """The workstation's path: what the cluster's must give again."""
    out = tmp_path_factory.mktemp("here")
    done = tpu_launcher(
        "data", "prepare", str(corpus), "--name", "d", "--output-dir", str(out),
        "--shard-mb", SHARD_MB, "--no-progress", timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    target = out / DATASETS_SUBDIR / "d"
    return Manifest.from_json((target / MANIFEST).read_text()), target


def _shards(manifest: Manifest) -> list[str]:
    return [name for split in SPLITS for name in getattr(manifest, split).shards]


def test_a_corpus_in_the_bucket_is_prepared_there_by_four_tasks(
    local_cluster: LocalCluster, corpus, here, monkeypatch
):
    expected, local = here
    with gcs_emulator("corpora") as url:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)  # the job's hosts get it too
        from launcher.core.gcs import storage_client

        bucket = storage_client().bucket("corpora")
        for path in sorted(p for p in corpus.rglob("*") if p.is_file()):
            bucket.blob(f"raw/{path.relative_to(corpus).as_posix()}").upload_from_filename(
                str(path)
            )
        argv = (
            "data", "prepare", "gs://corpora/raw", "--name", "d",
            "--output-dir", "gs://corpora/prepared", "--shard-mb", SHARD_MB,
            "--address", default_address(), "--parallelism", "4", "--on-tpu-hosts",
        )  # fmt: skip
        done = local_cluster.launcher(*argv, timeout=400)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "4 task(s) at once, on every host" in done.stdout
        made = Manifest.from_json(bucket.blob(f"prepared/datasets/d/{MANIFEST}").download_as_text())
        assert made.checksum == expected.checksum
        assert (made.source, made.source_sha256) == ("gs://corpora/raw", expected.source_sha256)
        first = _shards(made)[0]
        sent = bucket.blob(f"prepared/datasets/d/{first}").download_as_bytes()
        assert sent == (local / first).read_bytes()
        names = {b.name for b in storage_client().list_blobs("corpora", prefix="prepared/")}
        assert not any("prepare-state" in n for n in names)

        again = local_cluster.launcher(*argv, timeout=400)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "already prepared from this source; nothing to do" in again.stdout
    # Nothing of it on this machine: no staging copy, no dataset in the local bucket.
    assert not (REPO / DATA_STAGING / "corpora").exists()  # where the launcher ran
    assert not (local_cluster.bucket / DATASETS_SUBDIR / "d").exists()


def test_one_task_at_a_time_stopped_midway_resumes_to_the_workstation_dataset(
    local_cluster: LocalCluster, corpus, tmp_path
):
    """One task at a time on the head; stopped (`tpu-launcher stop`) once its state records two
    shards, then run again: the finished shards are kept, not written again, and the dataset is
    the workstation's, byte for byte. Its shards are tiny (some 450) so that the job is still
    writing when the stop comes: the state is saved every 2 s, a stop takes a few."""
    shard_mb = "0.0003"
    whole = tpu_launcher(
        "data", "prepare", str(corpus), "--name", "d", "--output-dir", str(tmp_path / "here"),
        "--shard-mb", shard_mb, "--no-progress", timeout=300,
    )  # fmt: skip
    assert whole.returncode == 0, whole.stdout + whole.stderr
    local = tmp_path / "here" / DATASETS_SUBDIR / "d"
    expected = Manifest.from_json((local / MANIFEST).read_text())
    assert expected.duplicates_dropped == 50 + 60 and expected.empty_dropped == 1
    assert len(_shards(expected)) > 300
    out_dir = tmp_path / "on-ray"
    argv = (
        "data", "prepare", str(corpus), "--name", "d", "--output-dir", str(out_dir),
        "--shard-mb", shard_mb, "--address", default_address(), "--parallelism", "1",
    )  # fmt: skip
    env = {**os.environ, "LAUNCHER_STATE_DIR": str(local_cluster.bucket / ".state")}
    target = out_dir / DATASETS_SUBDIR / "d"
    state = target / ".prepare-state.json"
    with subprocess.Popen(
        ends_with_this_process([sys.executable, "-m", "launcher", *argv]),
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ) as first:  # fmt: skip
        deadline = time.monotonic() + 300
        while len(_recorded(state)) < 2:
            assert first.poll() is None, first.stdout.read() if first.stdout else ""
            assert time.monotonic() < deadline, "no shard recorded in 300 s"
            time.sleep(0.2)
        stopped = local_cluster.launcher("stop", "--address", default_address())
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        out, _ = first.communicate(timeout=120)
    assert first.returncode != 0 and not (target / MANIFEST).exists(), out
    kept = _recorded(state)
    before = {n: (target / n).stat().st_mtime_ns for n in kept}
    planned = sum(json.loads(state.read_text())["settings"]["shards"].values())
    assert 2 <= len(kept) < planned, f"{len(kept)} of {planned} shards before the stop"

    again = local_cluster.launcher(*argv, timeout=400)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"data: resuming: {len(kept)} shard(s) already written" in again.stdout
    assert {n: (target / n).stat().st_mtime_ns for n in kept} == before  # not written again
    assert "1 task(s) at once, on the head and CPU hosts" in again.stdout
    assert "the tasks ran on 1 node(s): the head; 0 of them TPU hosts" in again.stdout
    assert "== prepared ==" in again.stdout and "data: wrote" in again.stdout
    made = Manifest.from_json((target / MANIFEST).read_text())
    assert made.checksum == expected.checksum
    assert (made.source_sha256, _shards(made)) == (expected.source_sha256, _shards(expected))
    for name in _shards(made):
        assert (target / name).read_bytes() == (local / name).read_bytes(), name
    assert not state.exists()


def _recorded(state: Path) -> dict:
    """The shards a state file records as finished (none while it is absent or being replaced)."""
    try:
        return json.loads(state.read_text())["shards"]
    except (OSError, ValueError):
        return {}
