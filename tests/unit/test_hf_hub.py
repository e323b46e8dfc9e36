"""`import hf://ORG/NAME`: the job's driver downloads a model from the Hugging Face Hub into the
bucket with the token the chart gives it, then imports it. The Hub here is tests/support's FAKE
on 127.0.0.1 (the real one cannot be reached from the test machines), found through
huggingface_hub's own HF_ENDPOINT; the client is the real huggingface_hub, in a process of its
own as on the head (it reads HF_ENDPOINT and HF_TOKEN when it starts)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.core.errors import UsageError
from launcher.core.job.run_dir import OUTPUT_DIR_ENV
from launcher.core.maxtext.model_imports import IMPORT_RECORD, ImportRecord, hub_model, import_dir
from launcher.runtime.models.families import maxtext_keys
from tests.support.fake_hub import HubRepo, fake_hub
from tests.support.hf_llama_reference import write_tiny_llama

pytestmark = pytest.mark.unit

TOKEN = "hf_test_token"
COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
# The driver's side of `tpu-launcher import SOURCE --name NAME`, on this host (no Ray cluster):
# each SOURCE in argv, its outcome printed as one JSON line.
DRIVER = """
import json, sys
from launcher.core.errors import UsageError
from launcher.core.job.run_requests import ImportRequest
from launcher.runtime.models.hf_import import import_model
for name, source in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        print(json.dumps({"rc": import_model(ImportRequest(name, source), on_this_host=True)}))
    except UsageError as e:
        print(json.dumps({"problem": e.problem, "fix": e.fix}))
"""


def _drive(hub_url: str, bucket: Path, token: str | None, *imports: str) -> list[dict]:
    env = {**os.environ, "HF_ENDPOINT": hub_url, "HF_HOME": str(bucket.parent / "hf-home"),
           OUTPUT_DIR_ENV: str(bucket), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}  # fmt: skip
    env.pop("HF_TOKEN", None)
    if token:
        env["HF_TOKEN"] = token
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, *imports], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.fixture
def llama_repo(tmp_path) -> Path:
    source = write_tiny_llama(tmp_path / "repo")
    # A Llama repo's second copy of the weights, in Meta's format: never fetched.
    (source / "original").mkdir()
    (source / "original" / "consolidated.00.pth").write_bytes(b"\0" * 4096)
    return source


def test_a_gated_model_comes_with_the_token_once_and_is_imported_whole(tmp_path, llama_repo):
    bucket = tmp_path / "bucket"
    repos = {"acme/tiny-llama": HubRepo(llama_repo, COMMIT, token=TOKEN)}
    with fake_hub(repos) as hub:
        first = _drive(hub.url, bucket, TOKEN, "tiny", "hf://acme/tiny-llama")
        fetched = sorted(hub.served)
        again = _drive(hub.url, bucket, TOKEN, "tiny", "hf://acme/tiny-llama@main")
        assert sorted(hub.served) == fetched, "a second import of the name downloads nothing"
    assert first == [{"rc": 0}] and again == [{"rc": 0}]
    assert (
        not [f for f in fetched if "/original/" in f] and "acme/tiny-llama/config.json" in fetched
    )
    assert any(f.endswith(".safetensors") for f in fetched)
    record = ImportRecord.from_json(
        (Path(import_dir(str(bucket), "tiny")) / IMPORT_RECORD).read_text()
    )
    # Hugging Face's own name (a model card's base_model) and the commit that was imported.
    assert (record.source, record.revision) == ("acme/tiny-llama", COMMIT)
    hf_config = json.loads((llama_repo / "config.json").read_text())
    assert record.model == maxtext_keys(hf_config) and record.parameters == 106_816
    downloaded = bucket / "hf" / "acme" / "tiny-llama"
    assert (downloaded / "config.json").read_bytes() == (llama_repo / "config.json").read_bytes()


def test_what_the_hub_refuses_is_said_with_the_fix_and_nothing_is_imported(tmp_path, llama_repo):
    bucket = tmp_path / "bucket"
    with socket.socket() as s:  # a port nothing listens on: a Hub the head cannot reach
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    repos = {"acme/tiny-llama": HubRepo(llama_repo, COMMIT, token=TOKEN)}
    with fake_hub(repos) as hub:
        gated, missing = _drive(
            hub.url, bucket, None, "a", "hf://acme/tiny-llama", "b", "hf://acme/nothing"
        )
        (wrong_token,) = _drive(hub.url, bucket, "hf_other", "c", "hf://acme/tiny-llama")
        (revision,) = _drive(hub.url, bucket, TOKEN, "d", "hf://acme/tiny-llama@v9")
        assert hub.served == []
    (unreachable,) = _drive(closed, bucket, TOKEN, "e", "hf://acme/tiny-llama")
    assert "gated on the Hub" in gated["problem"] and "has no token (HF_TOKEN)" in gated["problem"]
    assert "--set ray.hfToken.secretName=hf-token" in gated["fix"]
    assert "the token the cluster has was refused" in wrong_token["problem"]
    assert "no model acme/nothing on the Hub" in missing["problem"]
    assert "no revision 'v9'" in revision["problem"]
    assert f"could not download hf://acme/tiny-llama@main from {closed}" in unreachable["problem"]
    assert "hf download acme/tiny-llama --local-dir NAME" in unreachable["fix"]
    assert not (bucket / "imports").exists()


@pytest.mark.parametrize(
    "source", ["hf://acme--x/y", "hf://-acme/y", "hf://a/b/c", "hf://a/b@x;rm -rf", "hf://"]
)
def test_a_hub_id_the_hub_would_refuse_is_refused_before_a_job_starts(source):
    with pytest.raises(UsageError) as e:
        hub_model(source)
    assert e.value.field == "SOURCE"
