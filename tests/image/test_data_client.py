"""`data prepare` on a workstation with the client and its data extra only (no JAX, libtpu or
MaxText: what a macOS laptop can install): the same dataset, byte for byte, as the training
stack prepares from the same corpus, with the byte tokenizer, a Hugging Face tokenizer, a
sentencepiece model and a tiktoken file, each counted as MaxText counts it. A tokenizer asset
that only comes with MaxText is refused with the fix."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.paths import REPO
from tests.image.conftest import install_client, run_client
from tests.support.tokenizer_files import sentencepiece_model, tiktoken_file

pytestmark = pytest.mark.image


@pytest.fixture(scope="module")
def data_client(wheel, tmp_path_factory) -> tuple[Path, Path]:
    return install_client(tmp_path_factory.mktemp("data-client"), f"{wheel}[data]")


def _files(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _prepare_here(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """The same command with the training stack (this checkout's environment)."""
    return subprocess.run(
        [str(REPO / ".venv" / "bin" / "tpu-launcher"), "data", "prepare", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def test_the_data_extra_brings_no_training_stack(data_client):
    python = str(data_client[0] / "bin" / "python")
    for module in ("jax", "maxtext", "libtpu", "ray", "torch"):
        found = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
        assert found.returncode != 0, module


@pytest.mark.parametrize("tokenizer", ["bytes", "hf", "sentencepiece", "tiktoken"])
def test_the_same_corpus_gives_the_same_dataset_with_or_without_maxtext(
    data_client, tmp_path, tokenizer
):
    corpus = REPO / "launcher" / "corpus" / "tiny"
    argv = [str(corpus), "--name", "tiny", "--no-progress", "--shard-mb", "0.05"]
    if tokenizer == "hf":  # a Hugging Face tokenizer directory of the team's own
        made = _prepare_here(str(corpus), "--name", "seed", "--no-progress", cwd=tmp_path)
        assert made.returncode == 0, made.stderr
        argv += ["--tokenizer", str(tmp_path / ".local/bucket/datasets/seed/tokenizer")]
    if tokenizer == "sentencepiece":
        argv += ["--tokenizer", str(sentencepiece_model(tmp_path))]
    if tokenizer == "tiktoken":
        argv += ["--tokenizer", str(tiktoken_file(tmp_path))]
    light, full = tmp_path / "light", tmp_path / "full"
    light.mkdir()
    full.mkdir()
    ran = run_client(data_client, "data", "prepare", *argv, "--output-dir", str(light))
    assert ran.returncode == 0, ran.stderr
    ran_full = _prepare_here(*argv, "--output-dir", str(full), cwd=tmp_path)
    assert ran_full.returncode == 0, ran_full.stderr
    ours, theirs = _files(light / "datasets/tiny"), _files(full / "datasets/tiny")
    assert ours.keys() == theirs.keys() and len(ours) > 4
    assert ours == theirs  # the manifest (its token counts included) and every shard


def test_a_tokenizer_asset_only_maxtext_has_is_refused_with_the_fix(data_client, tmp_path):
    ran = run_client(
        data_client, "data", "prepare", "--name", "x", "--tokenizer", "tokenizer.llama2",
        "--output-dir", str(tmp_path / "out"), "--no-progress",
    )  # fmt: skip
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "tokenizer assets" in ran.stderr and "come with MaxText" in ran.stderr
    assert "Traceback" not in ran.stderr
    assert not (tmp_path / "out" / "datasets" / "x").exists()


def test_without_the_extra_data_prepare_says_which_to_install(client, tmp_path):
    ran = run_client(client, "data", "prepare", "--name", "x", "--output-dir", str(tmp_path))
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert f"pip install '{REPO}[data]'" in ran.stderr and "Traceback" not in ran.stderr
    to_gcs = run_client(client, "data", "prepare", "--name", "x", "--output-dir", "gs://b/p")
    assert to_gcs.returncode == 2 and f"'{REPO}[gcs]'" in to_gcs.stderr, to_gcs.stderr
