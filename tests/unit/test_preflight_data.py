"""Preflight checks a job's data where it is before it compiles anything: for a job of no
release, in this directory's local bucket (where the local cluster's hosts read it); for a
release's job without --data-dir, it says in one line that it did not look. And `data prepare`
writes to this directory's bucket, never to another checkout's running cluster's."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.launcher_cli import tpu_launcher_here

pytestmark = pytest.mark.unit
JOB = ["--", "--tpu=v6e-16", "base.yml", "model_name=llama3-8b", "run_name=r"]


def test_a_missing_dataset_is_refused_in_seconds_with_no_compile(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    code, out, err = tpu_launcher_here(capsys, "preflight", *JOB[:2], "--data=nosuch", *JOB[2:])
    assert code == 2, out + err
    assert f"no prepared dataset at {tmp_path}/.local/bucket/datasets/nosuch" in err
    assert "compile" not in out  # refused before the compile starts
    assert time.monotonic() - started < 60  # seconds, where a compile takes a minute or more


def test_a_release_job_says_its_data_was_not_looked_at(capsys, tmp_path, monkeypatch):
    """With a values file's slice, the data is in the release's bucket: said, not passed."""
    monkeypatch.chdir(tmp_path)
    job = ["--", "--from=model", "--data=team", "base.yml", "run_name=r"]
    code, out, err = tpu_launcher_here(capsys, "preflight", "-f", "v6e-16", *job)
    assert code == 0, err  # --from's shape is in the bucket: nothing compiled
    assert "preflight: the job's data is not checked here" in out
    assert "--data-dir" in out


def test_data_prepare_writes_here_not_to_another_checkouts_cluster(tmp_path, monkeypatch):
    from launcher.client.data.commands import default_output_dir
    from launcher.client.local import cluster as local_cluster

    record = tmp_path / "nodes.json"
    other = tmp_path / "other-checkout"
    record.write_text(json.dumps({"bucket": f"{other}/.local/bucket", "started_from": str(other)}))
    monkeypatch.setattr(local_cluster, "nodes_file", lambda: record)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert default_output_dir() == Path(".local/bucket")
    record.write_text(json.dumps({"bucket": "/elsewhere/bucket", "started_from": str(here)}))
    assert str(default_output_dir()) == "/elsewhere/bucket"  # this directory's own cluster's
