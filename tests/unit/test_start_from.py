"""`--from RUN`: a job starts from another run's committed checkpoint, its parameters only, and
builds that run's model whatever config file it names. "The same model" is checked by MaxText's
own config loader (pyconfig), not by our reading of the keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.core.errors import UsageError
from launcher.core.job.run_record import write_run_record
from launcher.core.job.start_from import RunStart, resolve_from
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.maxtext.model_imports import IMPORT_RECORD, ImportRecord, import_dir
from launcher.runtime.models.card import model_card

pytestmark = pytest.mark.unit

# What MaxText derives from the model keys: the parameter tree's sizes.
SIZES = (
    "decoder_block", "emb_dim", "num_query_heads", "num_kv_heads", "mlp_dim",
    "num_decoder_layers", "head_dim", "vocab_size", "logits_via_embedding", "scan_layers",
)  # fmt: skip


def _run(root: Path, name: str, argv: list[str], steps: tuple[int, ...] = (10, 20)) -> None:
    write_run_record(root / name, MaxTextArgs.parse(argv))
    for step in steps:
        (root / name / "checkpoints" / str(step)).mkdir(parents=True)
        (root / name / "checkpoints" / str(step) / "commit_success.txt").write_text("")
    (root / name / "checkpoints" / "30").mkdir(parents=True)  # a save cut short: never loaded


def _pyconfig(args: MaxTextArgs):
    from maxtext.configs import pyconfig

    keys = ["hardware=cpu", "skip_jax_distributed_system=True"]
    return pyconfig.initialize([*args.argv("from"), *keys])


def _sizes(args: MaxTextArgs) -> dict[str, object]:
    config = _pyconfig(args)
    return {k: str(getattr(config, k)) for k in SIZES}


def test_a_run_is_started_from_its_latest_committed_checkpoint_as_the_hosts_see_it(tmp_path):
    _run(tmp_path, "pre", ["tiny-llama.yml", "run_name=pre", "steps=20"])
    args, start = resolve_from(MaxTextArgs.parse(["run_name=sft"]), "pre", "/data", str(tmp_path))
    assert isinstance(start, RunStart) and (start.run, start.step) == ("pre", 20)
    assert args.overrides["load_parameters_path"] == "/data/pre/checkpoints/20/items"
    assert "starts from run pre at step 20" in start.describe()
    _, earlier = resolve_from(MaxTextArgs.parse(["run_name=sft"]), "pre@10", str(tmp_path))
    assert isinstance(earlier, RunStart) and earlier.step == 10


def test_a_job_naming_another_config_builds_the_runs_model_as_maxtext_reads_it(tmp_path):
    # The run's model is tiny-llama.yml's (its sizes in the config file, not on the command line).
    run = MaxTextArgs.parse(["tiny-llama.yml", "run_name=pre", "base_num_decoder_layers=3"])
    _run(tmp_path, "pre", ["tiny-llama.yml", "run_name=pre", "base_num_decoder_layers=3"])
    job = MaxTextArgs.parse(["base.yml", "run_name=sft"])
    assert _sizes(job) != _sizes(run)  # base.yml's own model is another one
    args, _ = resolve_from(job, "pre", str(tmp_path))
    assert _sizes(args) == _sizes(run)
    assert args.overrides["base_emb_dim"] == "64" and args.overrides["vocab_size"] == "256"


def test_a_run_of_a_named_model_passes_its_name_not_the_keys_its_model_file_sets(tmp_path):
    # MaxText refuses a key given on the command line that the model file sets too.
    _run(tmp_path, "pre", ["base.yml", "run_name=pre", "model_name=llama2-7b"])
    args, _ = resolve_from(MaxTextArgs.parse(["base.yml", "run_name=sft"]), "pre", str(tmp_path))
    assert args.overrides["model_name"] == "llama2-7b" and "base_emb_dim" not in args.overrides
    assert _sizes(args) == _sizes(MaxTextArgs.parse(["base.yml", "model_name=llama2-7b"]))


def test_a_model_key_that_contradicts_the_run_and_a_step_not_committed_are_refused(tmp_path):
    _run(tmp_path, "pre", ["tiny-llama.yml", "run_name=pre"])
    with pytest.raises(UsageError) as e:
        resolve_from(MaxTextArgs.parse(["base_emb_dim=128", "run_name=s"]), "pre", str(tmp_path))
    assert e.value.field == "base_emb_dim" and "trained with base_emb_dim=64" in e.value.problem
    with pytest.raises(UsageError) as e:
        resolve_from(MaxTextArgs.parse(["run_name=s"]), "pre@30", str(tmp_path))
    assert "no committed checkpoint 30 (it has 10, 20)" in e.value.problem
    with pytest.raises(UsageError) as e:
        resolve_from(MaxTextArgs.parse(["run_name=pre"]), "pre", str(tmp_path))
    assert "this job's own run_name" in e.value.problem and "resume" in e.value.fix
    _run(tmp_path, "empty", ["tiny-llama.yml", "run_name=empty"], steps=())
    with pytest.raises(UsageError) as e:
        resolve_from(MaxTextArgs.parse(["run_name=s"]), "empty", str(tmp_path))
    assert "no committed checkpoint" in e.value.problem


def test_an_import_and_a_run_of_one_name_are_told_apart_only_when_said(tmp_path):
    _run(tmp_path, "llama", ["tiny-llama.yml", "run_name=llama"])
    record = ImportRecord("llama", "/src", "LlamaForCausalLM", {"base_emb_dim": "64"}, 1, "f32", 0)
    (Path(import_dir(str(tmp_path), "llama")) / IMPORT_RECORD).parent.mkdir(parents=True)
    (Path(import_dir(str(tmp_path), "llama")) / IMPORT_RECORD).write_text(record.to_json())
    job = MaxTextArgs.parse(["tiny-llama.yml", "run_name=s"])
    with pytest.raises(UsageError) as e:
        resolve_from(job, "llama", str(tmp_path))
    assert "--from=import:llama or --from=run:llama" in e.value.fix
    assert resolve_from(job, "import:llama", str(tmp_path))[1] == record
    assert isinstance(resolve_from(job, "run:llama", str(tmp_path))[1], RunStart)
    assert isinstance(resolve_from(job, "llama@10", str(tmp_path))[1], RunStart)
    with pytest.raises(UsageError) as e:
        resolve_from(job, "nothing", str(tmp_path))
    assert "(imports: llama; runs: llama)" in e.value.problem
    for bad in ("../llama", "run:", "llama@x"):
        with pytest.raises(UsageError):
            resolve_from(job, bad, str(tmp_path))
    with pytest.raises(UsageError) as e:
        resolve_from(MaxTextArgs.parse(["load_parameters_path=/x", "run_name=s"]), "llama@10",
                     str(tmp_path))  # fmt: skip
    assert e.value.field == "load_parameters_path"


def test_the_model_card_of_a_run_started_from_a_run_names_both_and_the_first_import(tmp_path):
    record = ImportRecord("base", "/src/llama", "LlamaForCausalLM", {}, 106_816, "float32", 0.1)
    Path(import_dir(str(tmp_path), "base")).mkdir(parents=True)
    (Path(import_dir(str(tmp_path), "base")) / IMPORT_RECORD).write_text(record.to_json())
    imported = f"{import_dir(str(tmp_path), 'base')}/0/items"
    _run(tmp_path, "pre", ["tiny-llama.yml", "run_name=pre", f"load_parameters_path={imported}"])
    args, _ = resolve_from(MaxTextArgs.parse(["run_name=sft"]), "pre", str(tmp_path))
    card = model_card("sft", 5, "/x", args)
    assert "from run `pre` at step 20" in card and "import `base`" in card
    assert json.dumps("/src/llama") in card  # Hugging Face's base_model: the first import


def test_a_run_of_a_gemma3_import_is_started_from_with_its_windows_and_ropes(tmp_path):
    """Gemma 3 1B's keys (launcher/runtime/models/families.py) over gemma3-4b's model file: a
    job from that run must build the 1B (a 512-token window, no rope scaling), not the 4B the
    model file describes; MaxText's pyconfig refuses the keys without override_model_config."""
    from launcher.runtime.models.families import maxtext_keys
    from tests.support.tiny_models import GEMMA3_1B

    keys = maxtext_keys(GEMMA3_1B)
    _run(
        tmp_path, "pre", ["tiny-llama.yml", "run_name=pre", *(f"{k}={v}" for k, v in keys.items())]
    )
    args, _ = resolve_from(MaxTextArgs.parse(["tiny-llama.yml", "run_name=sft"]), "pre", "/d",
                           str(tmp_path))  # fmt: skip
    config = _pyconfig(args)
    assert (config.sliding_window_size, config.rope_linear_scaling_factor) == (512, 1.0)
    assert (config.emb_dim, config.num_decoder_layers, config.head_dim) == (1152, 26, 256)
    assert (config.local_rope_max_timescale, config.rope_max_timescale) == (10_000, 1_000_000)
