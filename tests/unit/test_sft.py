"""`--trainer=sft`'s pieces that need no cluster: the instruction set the project ships, `data
prepare --fields` read back through MaxText's own SFT transforms (what each host's Grain
pipeline does with a record: parse, render with the chat template, mask the prompt), the
trainer's keys and what is refused before a job starts (DPO, wrong fields, no chat template),
and `generate --chat`'s refusal. Training on it is tests/e2e/test_fine_tune_e2e.py's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from launcher.client.data.prepare import PrepareRequest, prepare
from launcher.core.data.byte_tokenizer import byte_tokenizer_files
from launcher.core.data.datasets import maxtext_keys
from launcher.core.errors import UsageError
from launcher.core.job.plan import JobOptions, plan_job
from launcher.core.job.trainers import SFT_KEYS, describe_trainer, trainer_keys
from launcher.core.maxtext.args import MaxTextArgs
from launcher.corpus import instructions
from launcher.runtime.models.hf_export import tokenizer_files
from launcher.runtime.models.prompt_tokens import ByteTokenizer, tokenizer_for, user_turn_ids

pytestmark = pytest.mark.unit


def test_the_shipped_instruction_set_is_what_its_generator_writes_in_one_format():
    for name, text in instructions.files().items():
        assert (instructions.INSTRUCTIONS_DIR / name).read_text() == text, "run its generator"
    examples = instructions.examples()
    assert len({e["prompt"] for e in examples}) == len(examples) > 150
    assert all(e["completion"].startswith(instructions.ANSWER_PREFIX) for e in examples)


def _records(shard: Path, fields: tuple[str, ...]) -> list[dict]:
    """The shard's records as MaxText's Grain pipeline parses them (ParseFeatures, then
    NormalizeFeatures, as data_processing_utils.parse_and_keep_features applies them)."""
    from array_record.python.array_record_module import ArrayRecordReader
    from maxtext.input_pipeline import input_pipeline_utils as mt

    reader = ArrayRecordReader(str(shard))
    raw = [reader.read([i])[0] for i in range(reader.num_records())]
    reader.close()
    parse, normalize = mt.ParseFeatures(fields, True), mt.NormalizeFeatures(fields, True)
    return [normalize.map(parse.map(r)) for r in raw]


def test_an_instruction_set_is_prepared_as_maxtexts_sft_pipeline_reads_it(tmp_path):
    from maxtext.input_pipeline import input_pipeline_utils as mt
    from transformers import AutoTokenizer

    fields = ("prompt", "completion")
    request = PrepareRequest(instructions.INSTRUCTIONS_DIR, "sft", tmp_path, fields=fields)
    manifest = prepare(dataclasses.replace(request, eval_fraction=0.2, progress=False))
    assert manifest.fields == ["prompt", "completion"]
    assert manifest.train.examples + manifest.eval.examples == len(instructions.examples())
    keys = maxtext_keys(manifest, "/data/datasets/sft")
    assert keys["train_data_columns"] == keys["eval_data_columns"] == "['prompt','completion']"
    assert MaxTextArgs.parse([f"{k}={v}" for k, v in keys.items()]).get("train_data_columns") == [
        "prompt",
        "completion",
    ], "MaxText would not read these keys as a list"

    where = tmp_path / "datasets" / "sft"
    record = _records(where / manifest.train.shards[0], ("prompt", "completion"))[0]
    assert record in instructions.examples()
    # Rendered and masked as the SFT pipeline does (grain_data_processing's chat-template step
    # and SFTPromptMasking): the prompt's tokens are not trained on, the answer's are.
    tokenizer = AutoTokenizer.from_pretrained(where / "tokenizer")
    messages = [
        {"role": "user", "content": record["prompt"]},
        {"role": "assistant", "content": record["completion"]},
    ]
    rendered = mt.apply_chat_template({"m": messages}, tokenizer, "m")
    assert rendered["is_prompt"] == [True, False]
    assert rendered["m"] == [f"User: {record['prompt']}\nAssistant: ", record["completion"] + "\n"]
    chunks = {"m": [tokenizer.encode(t) for t in rendered["m"]], "is_prompt": [True, False]}
    masked = mt.SFTPromptMasking("m", completion_only=True, max_target_length=128).map(chunks)
    prompt_len = len(chunks["m"][0])
    assert set(masked["targets"][:prompt_len]) == {0}
    assert bytes(masked["targets"][prompt_len:].tolist()).decode() == record["completion"] + "\n"


def test_sft_sets_maxtexts_keys_and_refuses_what_would_fail_on_every_host(tmp_path):
    args = MaxTextArgs.parse(["run_name=r"])
    assert trainer_keys("sft", args, ["prompt", "completion"]) == SFT_KEYS
    assert trainer_keys("sft", args, None) == SFT_KEYS  # the data not seen here
    assert trainer_keys("pretrain", args, ["text"]) == {}
    with pytest.raises(UsageError) as e:
        trainer_keys("sft", args, ["text"])
    assert "hold text" in e.value.problem and "--fields prompt,completion" in e.value.fix
    with pytest.raises(UsageError) as e:
        trainer_keys("dpo", args, None)
    assert "Tunix's trainer" in e.value.problem and "--trainer=sft" in e.value.fix
    with pytest.raises(UsageError) as e:
        trainer_keys("rl", args, None)
    assert "train_rl.py" in e.value.problem and "--trainer=sft" in e.value.fix
    sft = args.with_defaults(**SFT_KEYS)
    assert describe_trainer(sft) and "the loss on its completion" in describe_trainer(sft)[0]
    assert describe_trainer(args) == []


def _sft_plan(tmp_path: Path, *argv: str):
    return plan_job(
        JobOptions(trainer="sft"), ["tiny-llama.yml", "run_name=r", *argv],
        output_dir=str(tmp_path),
    )  # fmt: skip


def test_sft_needs_a_chat_template_and_says_so_before_the_job_starts(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 128}))
    with pytest.raises(UsageError) as e:
        _sft_plan(tmp_path, "tokenizer_type=huggingface", f"tokenizer_path={plain}")
    assert e.value.field == "chat_template" and str(plain) in e.value.problem
    # A template given as MaxText's key, or one the tokenizer carries, is enough.
    template = "chat_template={{ messages[0]['content'] }}"
    _sft_plan(tmp_path, "tokenizer_type=huggingface", f"tokenizer_path={plain}", template)
    chat = tmp_path / "chat"
    chat.mkdir()
    byte_tokenizer_files(chat)
    plan = _sft_plan(tmp_path, "tokenizer_type=huggingface", f"tokenizer_path={chat}")
    assert plan.args.overrides["use_sft"] == "true"
    assert any(line.startswith("trainer: sft") for line in plan.input_lines())
    with pytest.raises(UsageError) as e:
        _sft_plan(tmp_path, "tokenizer_type=sentencepiece")
    assert e.value.field == "tokenizer_type" and "--from=NAME" in e.value.fix


def test_generate_chat_needs_the_runs_tokenizer_to_have_a_template():
    with pytest.raises(UsageError) as e:
        user_turn_ids(ByteTokenizer(), "hi")
    assert e.value.field == "--chat" and "has no chat template" in e.value.problem


BOS, EOS = "<s>", "</s>"
# A Llama-like chat format: BOS from the template, an end of turn after every message.
BOS_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def _bos_adding_tokenizer(directory: Path) -> None:
    """Byte-level BPE whose post-processor adds BOS (as Llama 3's and Mistral's do), with
    BOS and EOS as special tokens 256 and 257 and a chat template that places BOS itself."""
    from tokenizers import Tokenizer, processors

    directory.mkdir()
    byte_tokenizer_files(directory)  # the byte-level BPE, then BOS and EOS added to it
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.add_special_tokens([BOS, EOS])
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, 256)]
    )
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS}
    config |= {"chat_template": BOS_TEMPLATE, "model_max_length": 4096}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))


def test_sft_trains_on_the_ids_generate_chat_and_a_chat_server_send(tmp_path):
    """The ids MaxText's SFT pipeline trains an example on, with the keys --trainer=sft sets,
    are the chat template's, special tokens once: the prompt's are what `generate --chat`
    sends and what the export's template gives a chat server (transformers'
    apply_chat_template, as vLLM's chat API renders it)."""
    from maxtext.input_pipeline import data_processing_utils, grain_data_processing
    from transformers import AutoTokenizer

    source = tmp_path / "tokenizer"
    _bos_adding_tokenizer(source)
    tokenizer_keys = ["tokenizer_type=huggingface", f"tokenizer_path={source}", "vocab_size=512"]
    args = _sft_plan(tmp_path, *tokenizer_keys).args
    config = SimpleNamespace(
        tokenizer_path=str(source), tokenizer_type="huggingface", hf_access_token=None,
        add_bos=args.get("add_bos"), add_eos=args.get("add_eos"),
    )  # fmt: skip
    # What each host's Grain pipeline does with a record (sft_preprocessing_pipeline's steps).
    maxtexts, _ = data_processing_utils.get_tokenizer_and_pad_id(config)
    example = {"prompt": "What is 2+2?", "completion": "4"}
    columns = ("prompt", "completion")
    rendered = grain_data_processing._format_chat_template_grain(
        dict(example), columns, maxtexts.tokenizer
    )
    trained = grain_data_processing._tokenize_sft_chunks(rendered, "prompt", maxtexts.tokenizer)
    prompt_ids, completion_ids = trained["prompt"]

    exported = tmp_path / "export"
    exported.mkdir()
    tokenizer_files(args, exported)
    server = AutoTokenizer.from_pretrained(exported)
    user = [{"role": "user", "content": example["prompt"]}]
    turn = [*user, {"role": "assistant", "content": example["completion"]}]
    whole = server.apply_chat_template(turn, tokenize=True, return_dict=False)
    assert prompt_ids + completion_ids == whole, "trained on other ids than the template's"
    assert whole.count(256) == 1 and whole[0] == 256, "BOS once, where the template puts it"
    assert completion_ids == [*b"4", 257], "the answer and the end of its turn"
    asked = server.apply_chat_template(
        user, tokenize=True, add_generation_prompt=True, return_dict=False
    )
    assert asked == prompt_ids, "a chat server asks in another form than SFT trained"
    assert user_turn_ids(tokenizer_for(args), example["prompt"]) == prompt_ids, "generate --chat"
    # The user's own add_bos stands: --trainer=sft sets the keys only where they are not given.
    assert _sft_plan(tmp_path, *tokenizer_keys, "add_bos=true").args.get("add_bos") is True
