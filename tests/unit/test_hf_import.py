"""`import`: a Hugging Face Llama directory into MaxText's parameters, exactly. The model is
tests/support's tiny Llama (transformers' LlamaConfig, random weights); the reference is Hugging
Face's forward pass written out in numpy (float64). MaxText computes the logits as a job would:
its own model, its parameters loaded by its own loader from what the import wrote. The
conversion runs in this process (`on_this_host`); the Ray task that places it on a host with
the memory is the e2e test's (tests/e2e/test_fine_tune_e2e.py)."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file

from launcher.core.errors import UsageError
from launcher.core.job.run_dir import OUTPUT_DIR_ENV
from launcher.core.job.run_requests import ImportRequest
from launcher.core.job.start_from import resolve_from
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.maxtext.model_imports import (
    IMPORT_RECORD,
    PARAMS_ITEMS,
    ImportRecord,
    import_dir,
)
from launcher.runtime.models.conversion_host import conversion_bytes, largest_memory
from launcher.runtime.models.families import maxtext_keys
from launcher.runtime.models.hf_import import import_model
from tests.support.hf_llama_reference import HfLlama, write_tiny_llama
from tests.support.maxtext_logits import maxtext_logits

pytestmark = pytest.mark.unit

TOKENS = list(b"The import is exact, not only loadable.")
# float32 through two layers against float64: measured 2.2e-6 at logits of magnitude ~3.
TOLERANCE = 1e-4


@pytest.mark.parametrize("tied", [False, True], ids=["lm_head", "tied-embeddings"])
def test_the_imported_parameters_compute_hugging_faces_logits(tmp_path, monkeypatch, tied):
    source = write_tiny_llama(tmp_path / "hf", seed=3, tie_word_embeddings=tied)
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path / "bucket"))
    assert import_model(ImportRequest("tiny", str(source)), on_this_host=True) == 0

    target = Path(import_dir(str(tmp_path / "bucket"), "tiny"))
    record = ImportRecord.from_json((target / IMPORT_RECORD).read_text())
    assert (record.architecture, record.dtype, record.source) == (
        "LlamaForCausalLM", "float32", str(source),
    )  # fmt: skip
    assert record.parameters == sum(
        t.size for t in load_file(source / "model.safetensors").values()
    )
    assert (target / "tokenizer" / "tokenizer.json").is_file()
    assert not list(target.parent.glob(".*tmp*")), "a staging directory was left behind"

    reference = HfLlama(source)
    if tied:
        # MaxText multiplies by the embedding in bfloat16 where it is the output layer
        # (maxtext/layers/embeddings.py, attend_on_embedding): its numerics, not the import's.
        # The reference takes the same rounding there, and only there.
        embedding = reference.w["model.embed_tokens.weight"]
        reference.w["lm_head.weight"] = embedding.astype(ml_dtypes.bfloat16).astype(np.float64)
        reference.config = {**reference.config, "tie_word_embeddings": False}
    expected = reference.logits(TOKENS)
    got = maxtext_logits(record, target / PARAMS_ITEMS, TOKENS)
    assert np.abs(expected).max() > 1, "logits too small to tell a wrong layout apart"
    np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


def test_a_second_import_of_a_name_keeps_the_first(tmp_path, monkeypatch, capsys):
    source = write_tiny_llama(tmp_path / "hf")
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path / "bucket"))
    import_model(ImportRequest("tiny", str(source)), on_this_host=True)
    record = (Path(import_dir(str(tmp_path / "bucket"), "tiny")) / IMPORT_RECORD).read_text()
    capsys.readouterr()
    assert import_model(ImportRequest("tiny", str(source)), on_this_host=True) == 0
    assert "exists (imported before" in capsys.readouterr().out
    assert (
        Path(import_dir(str(tmp_path / "bucket"), "tiny")) / IMPORT_RECORD
    ).read_text() == record


LLAMA = {
    "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
}  # fmt: skip


def test_llama_31_rope_and_an_implied_head_dim_are_read_as_maxtext_names_them():
    llama31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}  # fmt: skip
    keys = maxtext_keys({**LLAMA, "rope_scaling": llama31, "rope_theta": 500000.0})
    assert (keys["rope_type"], keys["rope_max_timescale"], keys["head_dim"]) == (
        "llama3.1", "500000", "16",
    )  # fmt: skip
    assert keys["logits_via_embedding"] == "false" and "normalize_embedding_logits" not in keys


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"architectures": ["Qwen2ForCausalLM"]}, "this model is Qwen2ForCausalLM"),
        ({"attention_bias": True}, "attention_bias=True"),
        ({"hidden_act": "gelu"}, "hidden_act=gelu"),
        ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, "rope yarn"),
    ],
)
def test_what_maxtexts_llama_block_cannot_compute_is_refused_with_the_way_out(change, said):
    with pytest.raises(UsageError) as e:
        maxtext_keys({**LLAMA, **change})
    assert said in e.value.problem and "to_maxtext" in e.value.fix


def test_a_missing_source_says_how_to_bring_a_hub_model_into_the_bucket(tmp_path, monkeypatch):
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path))
    with pytest.raises(UsageError) as e:
        import_model(ImportRequest("m", "meta-llama/Llama-3.1-8B"), on_this_host=True)
    assert str(tmp_path / "meta-llama/Llama-3.1-8B") in e.value.problem
    assert "hf download meta-llama/Llama-3.1-8B" in e.value.fix
    assert not (tmp_path / "imports").exists()


def _imported(root: Path, name: str = "base") -> ImportRecord:
    record = ImportRecord(name, "/src", "LlamaForCausalLM", {"base_emb_dim": "64",
                          "scan_layers": "true"}, 1, "float32", 0.1)  # fmt: skip
    directory = Path(import_dir(str(root), name))
    directory.mkdir(parents=True)
    (directory / IMPORT_RECORD).write_text(record.to_json())
    return record


def test_from_names_the_imports_parameters_shape_and_tokenizer_where_the_hosts_see_them(
    tmp_path,
):
    record = _imported(tmp_path)
    args, found = resolve_from(MaxTextArgs.parse(["run_name=r"]), "base", "/data", str(tmp_path))
    assert found == record
    assert args.overrides == {
        "run_name": "r", "base_emb_dim": "64", "scan_layers": "true",
        "load_parameters_path": f"/data/imports/base/{PARAMS_ITEMS}",
        "tokenizer_type": "huggingface", "tokenizer_path": "/data/imports/base/tokenizer",
    }  # fmt: skip
    assert resolve_from(MaxTextArgs.parse(["scan_layers=True"]), "base", str(tmp_path))[1]


def test_from_refuses_a_shape_the_parameters_do_not_have_and_an_import_not_there(tmp_path):
    _imported(tmp_path)
    with pytest.raises(UsageError) as e:
        resolve_from(MaxTextArgs.parse(["base_emb_dim=128"]), "base", str(tmp_path))
    assert e.value.field == "base_emb_dim" and "contradicts --from=base" in e.value.problem
    with pytest.raises(UsageError) as e:
        resolve_from(MaxTextArgs.parse([]), "other", str(tmp_path))
    assert "(imports: base)" in e.value.problem
    assert "tpu-launcher import SOURCE --name other" in e.value.fix
    with pytest.raises(UsageError):
        resolve_from(MaxTextArgs.parse([]), "../base", str(tmp_path))
    assert json.loads((tmp_path / "imports/base" / IMPORT_RECORD).read_text())["name"] == "base"


def test_a_conversion_goes_where_the_memory_is_or_is_refused_with_the_sizes():
    gib = 1 << 30
    nodes = [
        {"Alive": True, "NodeManagerAddress": "10.0.0.1", "Resources": {"memory": 11 * gib}},
        {"Alive": True, "NodeManagerAddress": "10.0.0.2", "Resources": {"memory": 140 * gib}},
        {"Alive": False, "NodeManagerAddress": "10.0.0.3", "Resources": {"memory": 500 * gib}},
    ]
    # An 8B model in bfloat16 fits the TPU worker (the chart's 200G pod), not the head.
    assert largest_memory(nodes, conversion_bytes(16 * gib), "importing", "SOURCE") == 140 * gib
    with pytest.raises(UsageError) as e:  # a 70B one: on no live host
        largest_memory(nodes, conversion_bytes(140 * gib), "importing 140 GiB", "SOURCE")
    assert "needs about 282.0 GiB" in e.value.problem
    assert "offers 140.0 GiB (10.0.0.2)" in e.value.problem
    assert "ray.worker.resources.limits.memory" in e.value.fix


def test_the_import_request_reaches_its_job_whole_through_the_supervisors_shell(tmp_path):
    """The job's words as Ray's job supervisor runs them (bash -c on what RayJobs.submit
    joins with shlex.join), then parsed by the in-cluster command: the source comes back as
    given, and nothing in it runs."""
    import shlex
    import subprocess
    import sys

    from launcher.runtime.commands import parser

    request = ImportRequest("tiny", "hf/it's $(touch pwned) `id`; two  words\n--name=x")
    echo = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
    ran = subprocess.run(
        ["bash", "-c", shlex.join([*echo, *request.command()[3:]])],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    ns = parser().parse_args(json.loads(ran.stdout))
    assert ImportRequest(ns.name, ns.source) == request
    assert not (tmp_path / "pwned").exists()
