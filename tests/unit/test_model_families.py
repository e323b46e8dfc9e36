"""Every family `import` converts, exactly, both ways. For each, a tiny model that transformers
makes from the family's own config class (tests/support/tiny_models.py: random weights):
`import` writes MaxText's parameters, MaxText's own model loads them as a job would and computes
transformers' logits on the same tokens (greedy tokens equal at every position); `export`'s
conversion gives back the very tensors, and its config.json with them is a model transformers
loads that computes the same logits. A regression in one family's mapping fails its own case.
Llama's own case, against a numpy reference and with tied embeddings, is test_hf_import.py's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from launcher.core.errors import UsageError
from launcher.core.job.run_dir import OUTPUT_DIR_ENV
from launcher.core.job.run_requests import ImportRequest
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.maxtext.model_imports import (
    IMPORT_RECORD,
    PARAMS_ITEMS,
    ImportRecord,
    import_dir,
)
from launcher.core.maxtext.model_shape import MODEL_KEYS
from launcher.runtime.models.families import BY_ARCHITECTURE, maxtext_keys
from launcher.runtime.models.hf_export import ModelShape, restore_params, to_hf_tensors
from launcher.runtime.models.hf_import import import_model, maxtext_config
from tests.support.maxtext_logits import maxtext_logits
from tests.support.tiny_models import (
    FAMILIES,
    GEMMA3_1B,
    GEMMA3_27B_TEXT,
    SIZES,
    logits_of,
    tiny_model,
)

pytestmark = pytest.mark.unit

TOKENS = list(b"Every family, imported exactly.")
# float32 against float32 through two layers: measured under 1e-6 at logits of magnitude ~3.
TOLERANCE = 1e-4


def _bfloat16_output_layer(model):
    """The model with MaxText's output layer where it is the embedding: MaxText multiplies by
    the embedding in bfloat16 (layers/embeddings.py, attend_on_embedding). Gemma's table stores
    it times sqrt(hidden_size), 8 here: a power of two, which bfloat16 keeps exact."""
    import copy

    import torch

    untied = copy.deepcopy(model)
    weight = untied.get_input_embeddings().weight.detach()
    untied.lm_head.weight = torch.nn.Parameter(weight.to(torch.bfloat16).float())
    return untied


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_imports_computes_transformers_logits_and_exports_back(
    family, tmp_path, monkeypatch
):
    import transformers

    source = tmp_path / "hf"
    model = tiny_model(family, source)
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path / "bucket"))
    assert import_model(ImportRequest("m", str(source)), on_this_host=True) == 0
    target = Path(import_dir(str(tmp_path / "bucket"), "m"))
    record = ImportRecord.from_json((target / IMPORT_RECORD).read_text())
    tensors = load_file(source / "model.safetensors")
    assert record.architecture == type(model).__name__
    assert record.model["decoder_block"] == BY_ARCHITECTURE[record.architecture].block
    assert record.parameters == sum(t.size for t in tensors.values())

    expected = logits_of(model, TOKENS)
    got = maxtext_logits(record, target / PARAMS_ITEMS, TOKENS)
    assert np.abs(expected).max() > 1, "logits too small to tell a wrong layout apart"
    tied = model.config.tie_word_embeddings
    computed = logits_of(_bfloat16_output_layer(model), TOKENS) if tied else expected
    np.testing.assert_allclose(got, computed, atol=TOLERANCE, rtol=0)
    # Tied, the rounding alone can turn a near tie (Gemma 3's case here, at one position).
    assert (got.argmax(-1) == computed.argmax(-1)).all()

    shape = ModelShape.from_maxtext(maxtext_config(record.model))
    back = to_hf_tensors(restore_params(target / PARAMS_ITEMS), shape)
    assert back.keys() == tensors.keys()
    for name, tensor in tensors.items():
        if family == "gemma3" and "norm" in name:
            # MaxText keeps Gemma's norm weights as 1 + w (its tables' scale_rmsnorm hook):
            # back, w to within float32's step at 1.0.
            np.testing.assert_allclose(back[name], tensor, atol=2**-23, rtol=0, err_msg=name)
        else:
            np.testing.assert_array_equal(back[name], tensor, err_msg=name)
    config = shape.hf_config("float32", {})
    assert config["architectures"] == [record.architecture]
    # As export writes them (write_export), loaded as a server or a user loads them.
    exported = tmp_path / "exported"
    exported.mkdir()
    save_file(back, str(exported / "model.safetensors"), metadata={"format": "pt"})
    (exported / "config.json").write_text(json.dumps(config))
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(exported).float().eval()
    assert type(reloaded) is type(model)
    np.testing.assert_allclose(logits_of(reloaded, TOKENS), expected, atol=1e-6, rtol=0)


DEEPSEEK = {"architectures": ["DeepseekV3ForCausalLM"], **FAMILIES["deepseek-v3"][1]}
LLAMA32_ROPE = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
                "rope_theta": 500000.0}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "said", "fix"),
    [
        # Llama 3.2 1B/3B: MaxText's Llama 3.1 scaling has factor 8 built in.
        ({"architectures": ["LlamaForCausalLM"], "rope_parameters": LLAMA32_ROPE},
         "factor 8 built in", "to_maxtext"),
        # Mistral 7B v0.1: a 4,096-token window in a 32,768-token context.
        ({"architectures": ["MistralForCausalLM"], "sliding_window": 4096,
          "max_position_embeddings": 32768}, "sliding_window=4096", '"sliding_window": null'),
        ({"architectures": ["Qwen3MoeForCausalLM"], "num_experts": 4, "num_experts_per_tok": 2,
          "mlp_only_layers": [0]}, "every layer a MoE layer", "to_maxtext"),
        ({"architectures": ["Gemma3ForCausalLM"], "num_hidden_layers": 12,
          "layer_types": ["full_attention"] * 12}, "layer_types=", "to_maxtext"),
        ({"architectures": ["Gemma3ForCausalLM"], "num_hidden_layers": 6,
          "query_pre_attn_scalar": 100}, "query_pre_attn_scalar=100", "to_maxtext"),
        # MaxText's gpt-oss block scans pairs of layers (a window, then global).
        ({"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 3, "num_local_experts": 4,
          "num_experts_per_tok": 2}, "num_hidden_layers=3", "to_maxtext"),
        ({"architectures": ["GptOssForCausalLM"], "num_local_experts": 4, "num_experts_per_tok": 2,
          "swiglu_alpha": 1.5}, "swiglu_alpha=1.5", "to_maxtext"),
        ({"architectures": ["GptOssForCausalLM"], "num_local_experts": 4, "num_experts_per_tok": 2,
          "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "mscale": 0.7,
                              "original_max_position_embeddings": 4096}}, "mscale", "to_maxtext"),
        ({"architectures": ["GptOssForCausalLM"], "num_local_experts": 4, "num_experts_per_tok": 2,
          "rope_parameters": {"rope_type": "yarn", "factor": 2.5,
                              "original_max_position_embeddings": 4096}}, "factor=2.5",
         "to_maxtext"),
        ({"architectures": ["DeepseekV2ForCausalLM"]}, "this model is DeepseekV2ForCausalLM",
         "to_maxtext"),
        # MaxText renormalizes DeepSeek V3's sigmoid scores, and takes one mscale for the
        # softmax and the rotary output.
        ({**DEEPSEEK, "norm_topk_prob": False}, "norm_topk_prob=False", "to_maxtext"),
        ({**DEEPSEEK, "rope_parameters": {**DEEPSEEK["rope_parameters"], "mscale": 0.707}},
         "mscale equal to mscale_all_dim", "to_maxtext"),
        # The published DeepSeek V3 weights: FP8 with 128x128 block scales.
        ({**DEEPSEEK, "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                              "weight_block_size": [128, 128]}},
         "quantized (fp8)", "fp8_cast_bf16"),
    ],
    ids=["llama-3.2-rope", "mistral-window", "qwen3-moe-dense-layers", "gemma3-all-global",
         "gemma3-query-scale", "gpt-oss-odd-layers", "gpt-oss-alpha", "gpt-oss-mscale",
         "gpt-oss-fractional-yarn",
         "deepseek-v2", "deepseek-v3-not-renormalized", "deepseek-v3-mscales",
         "deepseek-v3-fp8"],
)  # fmt: skip
def test_what_a_familys_block_cannot_compute_is_refused_with_the_field_and_way_out(
    config, said, fix
):
    with pytest.raises(UsageError) as e:
        maxtext_keys({**SIZES, **config})
    assert said in e.value.problem and fix in e.value.fix


@pytest.mark.parametrize("family", FAMILIES)
def test_every_key_an_import_sets_is_one_a_run_started_from_it_is_held_to(family):
    """A run begun from a run of an import builds the same model on every key the import set
    (launcher.core.job.start_from compares MODEL_KEYS), and each value is of the kind MaxText's
    config model declares (a job given `beta_fast=32.0` is refused before it runs)."""
    import transformers

    config_class, extra = FAMILIES[family]
    config = getattr(transformers, config_class)(**{**SIZES, **extra}).to_dict()
    row = next(f for f in BY_ARCHITECTURE.values() if f.config_class == config_class)
    keys = maxtext_keys({**config, "architectures": [row.architecture]})
    assert set(keys) <= set(MODEL_KEYS), set(keys) - set(MODEL_KEYS)
    MaxTextArgs.parse([f"{k}={v}" for k, v in keys.items()]).check_value_types()


def test_qwen3s_window_switched_off_is_full_attention_and_imports():
    """Qwen3's config.json names a window it does not use (use_sliding_window false)."""
    qwen3 = {"architectures": ["Qwen3ForCausalLM"], "sliding_window": 4096,
             "use_sliding_window": False, "max_position_embeddings": 40960}  # fmt: skip
    keys = maxtext_keys({**SIZES, **qwen3})
    assert (keys["decoder_block"], keys["use_qk_norm"]) == ("qwen3", "true")


@pytest.mark.parametrize(
    ("config", "model_name", "scaling"),
    [(GEMMA3_1B, "gemma3-4b", "1.0"), (GEMMA3_27B_TEXT, "gemma3-27b", "8.0")],
    ids=["1b", "27b"],
)
def test_gemma3s_published_configs_take_maxtexts_query_scale_and_ropes(config, model_name, scaling):
    keys = maxtext_keys(config)
    assert (keys["model_name"], keys["rope_linear_scaling_factor"]) == (model_name, scaling)
    assert (keys["rope_max_timescale"], keys["local_rope_max_timescale"]) == ("1000000", "10000")
    assert keys["sliding_window_size"] == str(config["sliding_window"])
    assert "normalize_embedding_logits" not in keys  # the stored embedding is scaled
