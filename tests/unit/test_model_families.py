"""Every family `import` converts, exactly, both ways. For each, a tiny model that transformers
makes from the family's own config class (random weights, two layers, MoE with four experts):
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
from launcher.core.model_imports import IMPORT_RECORD, PARAMS_ITEMS, ImportRecord, import_dir
from launcher.core.run_dir import OUTPUT_DIR_ENV
from launcher.core.run_requests import ImportRequest
from launcher.runtime.hf_export import ModelShape, restore_params, to_hf_tensors
from launcher.runtime.hf_import import import_model, maxtext_config
from launcher.runtime.model_families import BY_ARCHITECTURE, maxtext_keys
from tests.support.maxtext_logits import maxtext_logits

pytestmark = pytest.mark.unit

SIZES = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, vocab_size=256,
)  # fmt: skip
# (transformers' config class, what the family adds to the sizes)
FAMILIES = {
    "qwen3": ("Qwen3Config", {}),
    # Qwen3-30B-A3B's routing (its config.json: norm_topk_prob true).
    "qwen3-moe": ("Qwen3MoeConfig", dict(num_experts=4, num_experts_per_tok=2,
                                          moe_intermediate_size=32, norm_topk_prob=True)),
    "mistral": ("MistralConfig", dict(sliding_window=None)),  # v0.3's: full attention
    "mixtral": ("MixtralConfig", dict(num_local_experts=4, num_experts_per_tok=2)),
}  # fmt: skip
TOKENS = list(b"Every family, imported exactly.")
# float32 against float32 through two layers: measured under 1e-6 at logits of magnitude ~3.
TOLERANCE = 1e-4


def _tiny(family: str, directory: Path):
    """The family's tiny model, saved as save_pretrained saves it; the model."""
    import torch
    import transformers

    config_class, extra = FAMILIES[family]
    config = getattr(transformers, config_class)(**SIZES, **extra)
    torch.manual_seed(5)
    model = transformers.AutoModelForCausalLM.from_config(config).float().eval()
    with torch.no_grad():  # larger than the initializer's, so a wrong layout moves the logits
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    model.save_pretrained(directory)
    return model


def _logits(model) -> np.ndarray:
    import torch

    with torch.no_grad():
        return model(torch.tensor([TOKENS])).logits[0].double().numpy()


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_imports_computes_transformers_logits_and_exports_back(
    family, tmp_path, monkeypatch
):
    import transformers

    source = tmp_path / "hf"
    model = _tiny(family, source)
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path / "bucket"))
    assert import_model(ImportRequest("m", str(source)), on_this_host=True) == 0
    target = Path(import_dir(str(tmp_path / "bucket"), "m"))
    record = ImportRecord.from_json((target / IMPORT_RECORD).read_text())
    tensors = load_file(source / "model.safetensors")
    assert record.architecture == type(model).__name__
    assert record.model["decoder_block"] == BY_ARCHITECTURE[record.architecture].block
    assert record.parameters == sum(t.size for t in tensors.values())

    expected = _logits(model)
    got = maxtext_logits(record, target / PARAMS_ITEMS, TOKENS)
    assert np.abs(expected).max() > 1, "logits too small to tell a wrong layout apart"
    np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)
    assert (got.argmax(-1) == expected.argmax(-1)).all()

    shape = ModelShape.from_maxtext(maxtext_config(record.model))
    back = to_hf_tensors(restore_params(target / PARAMS_ITEMS), shape)
    assert back.keys() == tensors.keys()
    for name, tensor in tensors.items():
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
    np.testing.assert_allclose(_logits(reloaded), expected, atol=1e-6, rtol=0)


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
        ({"architectures": ["Gemma3ForCausalLM"]}, "this model is Gemma3ForCausalLM",
         "to_maxtext"),
    ],
    ids=["llama-3.2-rope", "mistral-window", "qwen3-moe-dense-layers", "gemma3"],
)  # fmt: skip
def test_what_a_familys_block_cannot_compute_is_refused_with_the_field_and_way_out(
    config, said, fix
):
    with pytest.raises(UsageError) as e:
        maxtext_keys({**SIZES, **config})
    assert said in e.value.problem and fix in e.value.fix


def test_qwen3s_window_switched_off_is_full_attention_and_imports():
    """Qwen3's config.json names a window it does not use (use_sliding_window false)."""
    qwen3 = {"architectures": ["Qwen3ForCausalLM"], "sliding_window": 4096,
             "use_sliding_window": False, "max_position_embeddings": 40960}  # fmt: skip
    keys = maxtext_keys({**SIZES, **qwen3})
    assert (keys["decoder_block"], keys["use_qk_norm"]) == ("qwen3", "true")
