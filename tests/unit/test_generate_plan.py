"""`generate` before anything starts: which checkpoint, which model, which decode arguments,
and the refusals a user can hit, each naming what to change. The run directories are real
(checkpoint directories with and without Orbax's commit marker, the record `train` writes)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from launcher.client.jobs.output import JobOutput
from launcher.core.data.byte_tokenizer import byte_tokenizer_files
from launcher.core.errors import UsageError
from launcher.core.job.checkpoints import COMMIT_MARKER
from launcher.core.job.events import format_result, format_summary_title
from launcher.core.job.run_dir import CHECKPOINTS_SUBDIR, RUN_RECORD
from launcher.core.job.run_record import read_run_record, write_run_record
from launcher.core.job.run_requests import GenerateRequest, check_request
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.maxtext.model_imports import (
    IMPORT_RECORD,
    PARAMS_ITEMS,
    ImportRecord,
    import_dir,
)
from launcher.core.runtime_door import JOB_ENTRYPOINT
from launcher.runtime.commands import parser as _parser
from launcher.runtime.models.generate import PREFILL_BUCKET, plan_generation
from launcher.runtime.models.prompt_tokens import ByteTokenizer, tokenizer_for, until_eos

pytestmark = pytest.mark.unit


def _run(bucket: Path, name: str, committed: list[int], unfinished: list[int] = ()) -> Path:
    run_dir = bucket / name
    for step in committed:
        (run_dir / CHECKPOINTS_SUBDIR / str(step)).mkdir(parents=True)
        (run_dir / CHECKPOINTS_SUBDIR / str(step) / COMMIT_MARKER).write_text("")
    for step in unfinished:  # a save a killed host never finished
        (run_dir / CHECKPOINTS_SUBDIR / str(step)).mkdir(parents=True)
    args = MaxTextArgs.parse(
        ["tiny-llama.yml", f"run_name={name}", "steps=10", f"base_output_directory={bucket}"]
    ).with_defaults(load_full_state_path="gs://elsewhere/state")
    write_run_record(run_dir, args)
    return run_dir


def test_the_latest_committed_checkpoint_of_the_recorded_model(tmp_path):
    run_dir = _run(tmp_path, "demo", committed=[0, 5, 9], unfinished=[10])
    plan = plan_generation(GenerateRequest("demo", "hello", max_tokens=20), str(tmp_path))
    assert plan.found.step == 9, "an unfinished save must never be loaded"
    args = plan.args
    assert args.config.name == "tiny-llama.yml"
    assert args.get("load_parameters_path") == str(run_dir / "checkpoints/9/items")
    assert args.get("run_name") == "demo" and args.get("steps") == 10
    # The prompt is padded to a bucket; the target holds the prompt and the new tokens.
    assert plan.prompt_ids == list(b"hello")
    assert args.get("max_prefill_predict_length") == PREFILL_BUCKET
    assert args.get("max_target_length") == PREFILL_BUCKET + 20
    assert args.get("decode_sampling_strategy") == "weighted"
    assert args.get("enable_checkpointing") is False
    # Parameters only: a full state to restore would also need the optimizer's.
    assert "load_full_state_path" not in args.overrides


def test_a_chosen_step_greedy_and_the_users_keys_over_the_record(tmp_path):
    _run(tmp_path, "demo", committed=[0, 5, 9])
    prompt = "x" * (PREFILL_BUCKET + 1)
    request = GenerateRequest(
        "demo", prompt, temperature=0, step=5, maxtext_argv=["per_device_batch_size=2"]
    )
    plan = plan_generation(request, str(tmp_path))
    assert plan.found.step == 5
    assert plan.args.get("load_parameters_path").endswith("checkpoints/5/items")
    assert plan.args.get("decode_sampling_strategy") == "greedy"
    assert plan.args.get("per_device_batch_size") == 2
    assert plan.args.get("max_prefill_predict_length") == 2 * PREFILL_BUCKET


def test_a_run_trained_elsewhere_is_described_by_its_config(tmp_path):
    run_dir = _run(tmp_path, "old", committed=[3])
    (run_dir / RUN_RECORD).unlink()
    request = GenerateRequest("old", "hi")
    with pytest.raises(UsageError) as e:
        plan_generation(request, str(tmp_path))
    assert e.value.field == "--run" and RUN_RECORD in e.value.problem
    assert "-- tiny-llama.yml" in e.value.fix
    given = GenerateRequest("old", "hi", maxtext_argv=["tiny-llama.yml"])
    plan = plan_generation(given, str(tmp_path))
    assert plan.args.config.name == "tiny-llama.yml" and plan.args.get("run_name") == "old"


def test_a_run_without_checkpoints_or_without_that_step_is_refused(tmp_path):
    _run(tmp_path, "fresh", committed=[], unfinished=[0])
    with pytest.raises(UsageError) as e:
        plan_generation(GenerateRequest("fresh", "hi"), str(tmp_path))
    assert "no committed checkpoint" in e.value.problem and "run_name=fresh" in e.value.fix
    _run(tmp_path, "demo", committed=[0, 5])
    with pytest.raises(UsageError) as e:
        plan_generation(GenerateRequest("demo", "hi", step=7), str(tmp_path))
    assert "(it has 0, 5)" in e.value.problem and "latest (5)" in e.value.fix


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (GenerateRequest("demo", ""), "--prompt"),
        (GenerateRequest("", "hi"), "--run"),
        (GenerateRequest("demo", "hi", max_tokens=0), "--max-tokens"),
        (GenerateRequest("demo", "hi", temperature=-0.5), "--temperature"),
    ],
)
def test_bad_requests_are_refused_on_the_workstation(request_, field):
    with pytest.raises(UsageError) as e:
        check_request(request_)
    assert e.value.field == field and e.value.fix


def test_the_request_reaches_the_cluster_unchanged():
    request = GenerateRequest(
        "demo",
        'he said "hi" -- and left',
        max_tokens=8,
        seed=7,
        temperature=0.5,
        step=5,
        maxtext_argv=["tokenizer_path=/t/tok.model", "add_bos=false"],
    )
    argv = request.command()
    assert argv[:4] == [*JOB_ENTRYPOINT, "decode"]
    assert GenerateRequest.from_args(_parser().parse_args(argv[3:])) == request


def test_the_record_train_writes_is_what_generate_reads(tmp_path):
    args = MaxTextArgs.parse(["tiny-llama.yml", "run_name=r", "steps=3"])
    path = write_run_record(tmp_path / "r", args)
    assert path is not None and json.loads(path.read_text())["overrides"]["steps"] == "3"
    assert read_run_record(tmp_path / "r") == args
    assert write_run_record(Path("gs://bucket/r"), args) is None  # no filesystem to write to


def test_byte_tokens_and_the_end_of_a_sequence():
    tokens = ByteTokenizer()
    assert tokens.encode("hé") == [104, 195, 169] and tokens.decode([104, 195, 169]) == "hé"
    assert tokens.decode([104, 255]) == "h\ufffd"  # not UTF-8: marked, not dropped silently
    assert until_eos([5, 2, 9], eos_id=2) == [5, 2] and until_eos([5, 9], eos_id=2) == [5, 9]
    big = MaxTextArgs.parse(["tiny-llama.yml", "vocab_size=32000"])
    with pytest.raises(UsageError) as e:
        tokenizer_for(big)
    assert e.value.field == "tokenizer_path"
    assert isinstance(tokenizer_for(MaxTextArgs.parse(["tiny-llama.yml"])), ByteTokenizer)


def test_submit_shows_the_generated_text_and_keeps_the_result_line_in_the_log(tmp_path):
    screen = io.StringIO()
    output = JobOutput(tmp_path / "job.log", stream=screen, title="generating")
    output.feed("(RayTrainWorker pid=1) Config param vocab_size: 256\n")
    output.feed("launcher: generate from run demo, checkpoint step 9 (/b/demo/checkpoints/9)\n")
    title, result = format_summary_title("generate"), format_result({"text": "ab"})
    output.feed(f'\n{title}\ngenerated:  "\\u0004ab"\n{result}\n')
    output.close()
    shown = screen.getvalue()
    assert "checkpoint step 9" in shown and 'generated:  "\\u0004ab"' in shown
    assert "Config param" not in shown and result not in shown
    assert result in (tmp_path / "job.log").read_text()


def _import(bucket: Path, name: str, **shape: str) -> Path:
    """An import's directory as `tpu-launcher import` leaves it: record, parameters, tokenizer."""
    where = Path(import_dir(str(bucket), name))
    (where / PARAMS_ITEMS).mkdir(parents=True)
    (where / "tokenizer").mkdir()
    byte_tokenizer_files(where / "tokenizer")
    shape = {"decoder_block": "qwen3", "base_emb_dim": "64", "vocab_size": "256", **shape}
    record = ImportRecord(name, "/models/q", "Qwen3ForCausalLM", shape, 1000, "float32", 1.0)
    (where / IMPORT_RECORD).write_text(record.to_json())
    return where


def test_an_import_is_generated_from_with_the_model_its_from_builds(tmp_path):
    where = _import(tmp_path, "chat")
    plan = plan_generation(GenerateRequest("chat", "hi", temperature=0), str(tmp_path))
    assert plan.found.imported is not None and plan.found.describe().startswith("import chat")
    args = plan.args
    assert args.config.name == "base.yml", "no run config: MaxText's base and the import's keys"
    assert args.get("load_parameters_path") == str(where / PARAMS_ITEMS)
    assert (args.get("decoder_block"), args.get("base_emb_dim")) == ("qwen3", 64)
    assert args.get("tokenizer_path") == str(where / "tokenizer")
    assert plan.prompt_ids == list(b"hi")
    # A run of the same name is the run; import:NAME is the import; an import has no steps.
    _run(tmp_path, "chat", committed=[4])
    run_plan = plan_generation(GenerateRequest("chat", "hi"), str(tmp_path))
    assert run_plan.found.imported is None and run_plan.found.step == 4
    import_plan = plan_generation(GenerateRequest("import:chat", "hi"), str(tmp_path))
    assert import_plan.found.imported == where / PARAMS_ITEMS
    with pytest.raises(UsageError) as e:
        plan_generation(GenerateRequest("import:chat", "hi", step=3), str(tmp_path))
    assert e.value.field == "--step" and "one checkpoint" in e.value.problem


@pytest.mark.parametrize(
    "shape",
    [{"decoder_block": "gpt_oss", "sliding_window_size": "128"},
     {"decoder_block": "gemma3", "model_name": "gemma3-4b", "override_model_config": "true",
      "sliding_window_size": "128"}],
    ids=["gpt-oss", "gemma3"],
)  # fmt: skip
def test_generation_past_a_sliding_window_is_refused_within_it_planned(tmp_path, shape):
    """MaxText's engine masks a window by its caches' slots (generate.check_window): past the
    window it decodes a different model."""
    _import(tmp_path, "oss", **shape)
    # "hi": 2 tokens, padded to 16; 16 + 112 = 128 positions, the window.
    plan = plan_generation(GenerateRequest("oss", "hi", max_tokens=112), str(tmp_path))
    assert plan.args.get("max_target_length") == 128
    with pytest.raises(UsageError) as e:
        plan_generation(GenerateRequest("oss", "hi", max_tokens=113), str(tmp_path))
    assert "128-token sliding window" in e.value.problem
    assert "at most 112 new tokens" in e.value.fix and "vLLM" in e.value.fix
    # A window longer than the sequence, or a block without windowed layers: planned.
    _import(tmp_path, "long", **{**shape, "sliding_window_size": "4096"})
    plan_generation(GenerateRequest("long", "hi", max_tokens=1000), str(tmp_path))
    _import(tmp_path, "qwen", sliding_window_size="8")
    plan_generation(GenerateRequest("qwen", "hi", max_tokens=1000), str(tmp_path))


def test_generation_from_a_model_whose_routing_bias_maxtexts_engine_drops_is_refused(tmp_path):
    """DeepSeek V3's routing bias is a MoEBiasVar, which the engine's loader frees."""
    _import(tmp_path, "ds", decoder_block="deepseek", model_name="deepseek3-671b",
            override_model_config="true")  # fmt: skip
    with pytest.raises(UsageError) as e:
        plan_generation(GenerateRequest("ds", "hi"), str(tmp_path))
    assert "deepseek3-671b" in e.value.problem and "vLLM" in e.value.fix
