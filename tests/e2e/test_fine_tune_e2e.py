"""From a pretrained model to an answer, end to end on the real local Ray cluster, nothing from a
hub: a tiny Qwen3 directory as Hugging Face saves one (tests/support/tiny_models.py:
transformers' own config class and model, random weights, q/k norms, a byte tokenizer with a
chat template; a family other than Llama, whose road is the same) is imported as a job
(MaxText's conversion, in a Ray task that reserves its memory), fine-tuned with SFT on the
project's own instruction set (MaxText's train loop with use_sft, both simulated hosts,
held-out eval), then `generate` asks it a held-out question as a user (MaxText's inference
engine; before training, the import itself) and `export` writes it for vLLM. The exported model
(and the import) is held against MaxText by transformers' own forward pass: it must pick every
token MaxText picked. That each family's import is exact, logit for logit, is
tests/unit/test_model_families.py's (Llama's: test_hf_import.py's)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from harness.local_ray import launcher_result, run_name, tpu_launcher
from launcher.client.data.prepare import split_of
from launcher.core.job.checkpoints import committed_steps
from launcher.core.runtime_door import RUNTIME_MODULE
from launcher.corpus.instructions import ANSWER_PREFIX, examples
from tests.support.tiny_models import Transformers, parameter_count, tiny_model

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

EVAL_FRACTION = 0.2  # of 166 examples: about 30 held out, two eval batches
# The trained format, stated as a rule: every completion in the set is "Answer: <word>.".
TRAINED_FORMAT = re.compile(r"^Answer: [a-z]+\.")
# Held-out loss on the completions: an untrained model's is near ln(256) = 5.5 nats; 30 steps
# of SFT reach about 1 (6.03 -> 0.87 measured at step 30): at least halved, by a wide margin.
EVAL_RATIO = 0.5


@pytest.fixture(scope="module")
def held_out() -> dict[str, str]:
    """An example of the instruction set's eval split (by prepare's own rule): never trained on."""
    return next(
        e for e in examples()
        if split_of("\0".join((e["prompt"], e["completion"])), 0, EVAL_FRACTION) == "eval"
    )  # fmt: skip


def test_imports_fine_tunes_answers_and_exports(local_cluster, tmp_path, held_out):
    name = run_name("sft")
    # Made for a longer context than the run trains at (max_target_length 128): the export
    # says the model's own.
    source = local_cluster.bucket / "hf" / name
    tiny_model("qwen3", source, std=0.1, norms=1.0, max_position_embeddings=4096)
    parameters = parameter_count(source)
    imported = local_cluster.launcher("import", f"hf/{name}", "--name", name, timeout=300)
    out = imported.stdout + imported.stderr
    assert imported.returncode == 0, out[-6000:]
    record = launcher_result(out)
    assert (record["name"], record["source"]) == (name, str(source))
    assert record["parameters"] == parameters
    assert "as a task that reserves 2.0 GiB of host memory" in out and "== imported ==" in out
    assert f"--from={name}" in out

    # Generated from the import itself, before any run of that name (MaxText's base.yml with
    # the import's keys): greedy, every token the source model picks in transformers' forward
    # pass.
    plain = ("--prompt", held_out["prompt"], "--max-tokens", "8", "--temperature", "0")
    code, out = local_cluster.about_run("generate", name, *plain, "--", "dtype=float32")
    assert code == 0, out[-6000:]
    assert f"generate from import {name}" in out
    from_import = launcher_result(out)
    assert from_import["prompt_ids"] == list(held_out["prompt"].encode())
    base = Transformers(source)
    agreement = base.greedy_agreement(from_import["prompt_ids"], from_import["token_ids"])
    assert all(agreement), f"generate from the import disagrees with the source at {agreement}"

    dataset = f"{name}-set"
    prepared = tpu_launcher(
        "data", "prepare", "--fields", "prompt,completion", "--name", dataset, "--output-dir",
        str(local_cluster.bucket), "--eval-fraction", str(EVAL_FRACTION), "--no-progress",
    )  # fmt: skip
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    code, out = local_cluster.submit(
        "--trainer=sft", f"--from={name}", f"--data={dataset}", "tiny-llama.yml",
        f"run_name={name}", "steps=30", "eval_interval=10", "eval_steps=2", "num_epoch=8",
    )  # fmt: skip
    assert code == 0, out[-6000:]
    trained = launcher_result(out)
    assert f"starts from import {name}: {parameters:,} parameters of Qwen3ForCausalLM" in out
    assert "trainer: sft" in out, "the plan does not say it fine-tunes"
    evals = trained["evals"]
    assert evals[0][0] == 0 and len(evals) >= 3 and evals[-1][1] < EVAL_RATIO * evals[0][1], evals
    # An earlier checkpoint than the latest (29), chosen with --step by generate and export.
    step = committed_steps(local_cluster.bucket / name)[-2]
    assert step == 25

    # Asked as a user, greedy in float32 (to hold the export against), a question it never saw.
    asked = ("--prompt", held_out["prompt"], "--chat", "--max-tokens", "16", "--temperature", "0")
    code, out = local_cluster.about_run(
        "generate", name, *asked, "--step", str(step), "--", "dtype=float32"
    )
    assert code == 0, out[-6000:]
    answer = launcher_result(out)
    assert (answer["run"], answer["step"]) == (name, step), "not the checkpoint asked for"
    turn = f"User: {held_out['prompt']}\nAssistant: "  # the byte tokenizer's chat template
    assert answer["prompt_ids"] == list(turn.encode())
    assert TRAINED_FORMAT.match(answer["text"]), answer["text"]
    # The base model, before any training, does not answer so (the import's own weights,
    # greedy, by transformers): the format is what fine-tuning taught.
    ids = list(turn.encode())
    for _ in range(len(ANSWER_PREFIX)):
        ids.append(int(base.logits(ids)[-1].argmax()))
    assert bytes(ids[len(turn.encode()) :]).decode(errors="replace") != ANSWER_PREFIX
    assert f"generate from run {name}, checkpoint step {step}" in out
    assert "a user's turn, by the chat template" in out and "generated:  " in out
    assert "Config param" not in out and len(out.splitlines()) <= 25, out

    code, out = local_cluster.about_run("export", name, "--step", str(step))
    assert code == 0, out[-6000:]
    exported = launcher_result(out)
    model_dir = Path(exported["dir"])
    assert (exported["step"], model_dir.name, model_dir.parent.name) == (step, str(step), "hf")
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= {
        p.name for p in model_dir.iterdir()
    }
    assert "== exported ==" in out and "--set vllm.model=" in out
    assert not list(model_dir.parent.glob(".*tmp*")), "a staging directory was left behind"
    card = (model_dir / "README.md").read_text()
    assert f'base_model: "{source}"' in card and f"from import `{name}`" in card
    assert f"dataset `{dataset}`" in card and f"- steps: {step} " in card
    assert "Fine-tuned (SFT" in card
    hf = Transformers(model_dir)
    assert hf.config.architectures == ["Qwen3ForCausalLM"]
    assert hf.config.max_position_embeddings == exported["max_position_embeddings"] == 4096
    agreement = hf.greedy_agreement(answer["prompt_ids"], answer["token_ids"])
    assert all(agreement), f"the exported model disagrees with MaxText at {agreement}"

    # Again: kept. The job's own command, run here on the same bucket directory (what the job
    # runs on the head; a Ray job start would add a minute and test nothing more).
    again = tpu_launcher(
        "convert", "--run", name, "--step", str(step), "--",
        f"base_output_directory={local_cluster.bucket}",
        env={**os.environ, "JAX_PLATFORMS": "cpu"}, module=RUNTIME_MODULE,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert "exists (exported before); kept" in again.stdout + again.stderr


def test_a_run_without_checkpoints_is_named_with_the_fix(local_cluster):
    code, out = local_cluster.about_run("generate", "no-such-run", "--prompt", "hi")
    assert code == 2, out[-4000:]  # the head's refusal, before any host started
    assert "run 'no-such-run' has no committed checkpoint" in out
    assert "fix: train it first" in out
