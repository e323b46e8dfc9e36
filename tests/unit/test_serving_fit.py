"""The serving fit's arithmetic against published figures: Meta's Llama 3.1 parameter counts (the
model cards: 8.03B, 70.6B, 405B) and Hugging Face's "Llama 3.1 - 405B, 70B & 8B" post (the weights
in FP16 and FP8/INT8: 16/8 GB, 140/70 GB, 810/405 GB; the KV cache of 128k tokens in FP16: 15.62
GB for 8B, 39.06 GB for 70B, in GiB as computed there). And vLLM's rules: at least one request of
max_model_len must fit, the attention heads divide over the tensor-parallel devices, KV heads
replicate past their count. The other families against their makers' model cards: Qwen3-8B
8.2B, Qwen3-30B-A3B 30.5B with 3.3B activated, Mistral 7B 7.3B, Mixtral 8x7B 46.7B with 12.9B
active (Mistral AI's "Mixtral of experts" post), gpt-oss-20b 20.91B with 3.61B active and
gpt-oss-120b 116.83B with 5.13B (OpenAI's gpt-oss model card)."""

from __future__ import annotations

import pytest

from launcher.cli import main
from launcher.core import serving_fit
from launcher.core.errors import UsageError
from launcher.core.tpu.table import tpu_type

pytestmark = pytest.mark.unit

GIB = 2**30
MODELS = {n: serving_fit.model_size(c, n) for n, c in serving_fit.KNOWN_MODELS.items()}


@pytest.mark.parametrize(
    ("name", "billions", "bf16_gb", "int8_gb"),
    [
        ("llama3.1-8b", 8.03, 16, 8),
        ("llama3.1-70b", 70.6, 140, 70),
        ("llama3.1-405b", 405.9, 810, 405),
    ],
)
def test_parameters_and_weights_match_the_published_sizes(name, billions, bf16_gb, int8_gb):
    model = MODELS[name]
    assert model.parameters / 1e9 == pytest.approx(billions, abs=0.05)
    shape = tpu_type("tpu7x-256")
    for dtype, published in (("bfloat16", bf16_gb), ("int8", int8_gb)):
        weights = serving_fit.fit(model, shape, dtype=dtype).weights
        assert weights / 1e9 == pytest.approx(published, rel=0.015), (name, dtype)


@pytest.mark.parametrize(
    ("name", "billions", "active"),
    [
        ("qwen3-8b", 8.2, 8.2),
        ("qwen3-30b-a3b", 30.5, 3.3),
        ("mistral-7b", 7.3, 7.3),
        ("mixtral-8x7b", 46.7, 12.9),
        ("gpt-oss-20b", 20.91, 3.61),
        ("gpt-oss-120b", 116.83, 5.13),
    ],
)
def test_every_familys_published_config_has_its_published_parameter_count(name, billions, active):
    """A MoE's hosts hold every expert; a token computes with the routed ones."""
    model = MODELS[name]
    assert model.parameters / 1e9 == pytest.approx(billions, abs=0.06)
    # OpenAI's active figure leaves out the embedding's rows (a lookup, not a product).
    looked_up = 201088 * 2880 if name.startswith("gpt-oss") else 0
    assert (model.active_parameters - looked_up) / 1e9 == pytest.approx(active, abs=0.06)


def test_gemma3s_four_norms_and_qk_norms_give_its_exact_published_count():
    """google/gemma-3-1b-it's safetensors hold 999,885,952 parameters (tied embeddings)."""
    assert MODELS["gemma-3-1b"].parameters == 999_885_952


@pytest.mark.parametrize(("name", "gib"), [("llama3.1-8b", 15.62), ("llama3.1-70b", 39.06)])
def test_the_kv_cache_of_128k_tokens_matches_the_published_size(name, gib):
    # tensor parallel 8 = the models' 8 KV heads: no replication.
    per_token = MODELS[name].kv_bytes_per_token(2, tensor_parallel=8)
    assert per_token * 128_000 / GIB == pytest.approx(gib, abs=0.01)


def test_deepseeks_latent_attention_and_shared_experts_give_its_published_sizes():
    """DeepSeek-V3: 671B parameters, 37B active per token (its model card; 37.55B counted from
    its config, the card rounds); MLA caches (kv_lora_rank + qk_rope_head_dim) x 61 layers =
    35,136 elements a token (the DeepSeek-V2 paper's (d_c + d_h^R) l), whole on every device."""
    model = MODELS["deepseek-v3"]
    assert model.parameters / 1e9 == pytest.approx(671, abs=0.5)
    assert model.active_parameters / 1e9 == pytest.approx(37, abs=0.6)
    assert model.kv_bytes_per_token(2, tensor_parallel=1) == 35_136 * 2
    assert model.kv_bytes_per_token(2, tensor_parallel=8) == 8 * 35_136 * 2


def test_kv_heads_replicate_past_their_count():
    model = MODELS["llama3.1-8b"]  # 8 KV heads
    assert model.kv_bytes_per_token(2, 32) == 4 * model.kv_bytes_per_token(2, 8)


def test_405b_in_bf16_is_refused_on_v6e_16_naming_the_slice_that_fits():
    with pytest.raises(UsageError) as err:
        serving_fit.check(MODELS["llama3.1-405b"], "v6e-16")
    assert "v6e-16 has 115.2 GiB per host usable" in err.value.problem
    assert "--set vllm.tpu.type=v6e-32" in err.value.fix
    # What it names does hold it; int8 halves the weights and fits v6e-16 itself.
    assert serving_fit.check(MODELS["llama3.1-405b"], "v6e-32").shape.hosts == 8
    assert serving_fit.check(MODELS["llama3.1-405b"], "v6e-16", dtype="int8").fits


def test_the_smallest_slice_is_picked_per_generation():
    pick = {
        (n, g): serving_fit.smallest_fit(MODELS[n], g).shape.name
        for n in MODELS
        for g in ("v6e", "v5p")
    }
    assert pick[("llama3.1-8b", "v6e")] == "v6e-1"
    assert pick[("llama3.1-70b", "v6e")] == "v6e-8"  # GKE's vLLM tutorial's 70B slice
    assert pick[("llama3.1-405b", "v6e")] == "v6e-32"
    assert pick[("llama3.1-405b", "v5p")] == "v5p-32"  # 16 chips x 95 GiB


def test_a_longer_context_or_more_sequences_need_more():
    model = MODELS["llama3.1-70b"]
    roomy = serving_fit.fit(model, tpu_type("v6e-8"), max_model_len=8192)
    assert roomy.fits and roomy.sequences >= 30
    crowded = serving_fit.fit(model, tpu_type("v6e-8"), max_model_len=8192, max_num_seqs=64)
    assert not crowded.fits


def test_heads_that_do_not_divide_over_the_devices_are_refused():
    config = dict(serving_fit.KNOWN_MODELS["llama3.1-8b"], num_attention_heads=40)
    model = serving_fit.model_size(config, "odd")
    with pytest.raises(UsageError) as err:
        serving_fit.check(model, "v6e-16")
    assert "40 attention heads do not divide over the slice's 16" in err.value.problem
    assert "v6e-1" in err.value.fix or "v6e-8" in err.value.fix


def test_a_config_without_sizes_is_refused_with_the_fields_it_needs(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "t5"}')
    with pytest.raises(UsageError) as err:
        serving_fit.read_model(tmp_path)
    assert "hidden_size" in err.value.fix


def test_serve_fit_reads_a_model_directory_and_prints_the_slice(tmp_path, capsys):
    config = dict(serving_fit.KNOWN_MODELS["llama3.1-70b"], torch_dtype="float32")
    (tmp_path / "config.json").write_text(__import__("json").dumps(config))
    assert main(["serve-fit", str(tmp_path), "--max-model-len", "8192"]) == 0
    out = capsys.readouterr().out
    assert "131.4 GiB of weights at 2 bytes each" in out  # float32 serves as bfloat16
    assert "fits: --set vllm.tpu.type=v6e-8 --set vllm.maxModelLen=8192" in out
    assert main(["serve-fit", "llama3.1-405b", "--tpu", "v6e-16"]) == 2
    assert "--set vllm.tpu.type=v6e-32" in capsys.readouterr().err
