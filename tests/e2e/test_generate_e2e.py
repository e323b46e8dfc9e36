"""`tpu-launcher generate` and `export` end to end on the real local Ray cluster, from a run trained
by `tpu-launcher train`. Generation is MaxText's inference engine on both simulated hosts
(jax.distributed over 2 processes x 4 CPU devices) loading the run's committed checkpoint; the
export is checked against it by Hugging Face's Llama forward pass written out in numpy
(tests/support/hf_llama_reference.py): the exported model must pick every token MaxText picked.
The run is the session's `trained_run` (tests/e2e/conftest.py). The tiny model's text is
nonsense; what is asserted is the path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from harness.local_ray import launcher_result, tpu_launcher
from launcher.core.checkpoints import committed_steps
from tests.support.hf_llama_reference import HfLlama

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

PROMPT = 'say "hello"'


def test_generates_and_exports_a_runs_checkpoint(local_cluster, trained_run):
    assert trained_run.code == 0, trained_run.output[-6000:]
    name = trained_run.name
    # 9, or 14 where the train test resumed the run first.
    latest = committed_steps(trained_run.dir)[-1]

    # Greedy in float32 from the latest checkpoint (the default), to hold the export against.
    greedy = ("--prompt", PROMPT, "--max-tokens", "12", "--temperature", "0")
    code, out = local_cluster.about_run("generate", name, *greedy, "--", "dtype=float32")
    assert code == 0, out[-6000:]
    picked = launcher_result(out)
    assert (picked["run"], picked["step"]) == (name, latest), "not the latest committed checkpoint"
    assert picked["prompt_ids"] == list(PROMPT.encode())
    assert len(picked["token_ids"]) == 12 and all(0 <= t < 256 for t in picked["token_ids"])
    # What a user reads: the checkpoint, the slice, the text; not MaxText's config dump.
    assert f"generate from run {name}, checkpoint step {latest}" in out
    assert "2 workers x 4 devices" in out and "generated:  " in out
    assert "Config param" not in out and len(out.splitlines()) <= 25, out

    # Sampled, seeded, from an earlier checkpoint. (Three job starts, not four: the same seed's
    # same text again would cost a CI run another minute and a half.)
    sampled = ("--prompt", PROMPT, "--max-tokens", "12", "--seed", "7", "--step", "5")
    code, out = local_cluster.about_run("generate", name, *sampled)
    assert code == 0, out[-6000:]
    first = launcher_result(out)
    assert (first["step"], first["seed"], len(first["token_ids"])) == (5, 7, 12)
    assert "temperature 1.0, seed 7" in out

    code, out = local_cluster.about_run("export", name)
    assert code == 0, out[-6000:]
    exported = launcher_result(out)
    model_dir = Path(exported["dir"])
    assert (exported["step"], model_dir.name, model_dir.parent.name) == (latest, str(latest), "hf")
    assert exported["source"].endswith(f"{name}/checkpoints/{latest}")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in model_dir.iterdir()
    }
    assert "== exported ==" in out and "--set vllm.model=" in out
    assert not list(model_dir.parent.glob(".*tmp*")), "a staging directory was left behind"
    hf = HfLlama(model_dir)
    assert hf.config["architectures"] == ["LlamaForCausalLM"]
    assert Tokenizer.from_file(str(model_dir / "tokenizer.json")).encode(PROMPT).ids == list(
        PROMPT.encode()
    )
    agreement = hf.greedy_agreement(list(PROMPT.encode()), picked["token_ids"])
    assert all(agreement), f"the exported model disagrees with MaxText at {agreement}"

    # Again: kept. The job's own command, run here on the same bucket directory (what the job
    # runs on the head; a Ray job start would add a minute and test nothing more).
    again = tpu_launcher(
        "convert",
        "--run",
        name,
        "--step",
        str(latest),
        "--",
        f"base_output_directory={trained_run.dir.parent}",
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "exists (exported before); kept" in again.stdout + again.stderr


def test_a_run_without_checkpoints_is_named_with_the_fix(local_cluster):
    code, out = local_cluster.about_run("generate", "no-such-run", "--prompt", "hi")
    assert code == 1, out[-4000:]
    assert "run 'no-such-run' has no committed checkpoint" in out
    assert "fix: train it first" in out
