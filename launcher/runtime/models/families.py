"""The Hugging Face architectures `import` and `export` convert, one row a family: the MaxText
decoder block that computes it and the model whose conversion tables MaxText keeps for it
(maxtext.checkpoint_conversion.utils: param_mapping's names and hooks, hf_shape's shapes),
applied here to any size the model's own config.json gives. What a row's block cannot compute
(an activation, a bias, a rope, a window) is refused with the field, its value and the way out.

MaxText's tables are keyed by a model name with its sizes (to_maxtext's `model_name=`); the
functions behind a name take the sizes as a config dict, which is what lets one row serve every
size of its family. Llama 3.2's rotary scaling is refused: MaxText's LLaMARotaryEmbedding has
Llama 3.1's factor 8 built in (maxtext/layers/embeddings.py, _apply_scaling_factor), and a model
with factor 32 would be trained as a different model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from launcher.core.errors import UsageError

# The keys of MaxText's Llama 3.1 rotary scaling as Hugging Face's config.json names them
# (rope_type and rope_theta aside).
ROPE_SCALING_KEYS = (
    "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings",
)  # fmt: skip
MAXTEXT_CONVERTER = (
    "convert it with MaxText's own converter, which knows its models by name (python -m "
    "maxtext.checkpoint_conversion.to_maxtext model_name=...), and give its output as "
    "load_parameters_path="
)


@dataclass(frozen=True)
class Family:
    architecture: str  # config.json's architectures[0]
    block: str  # MaxText's decoder_block
    tables_of: str  # the model in MaxText's PARAM_MAPPING, HOOK_FNS and HF_SHAPE tables
    config_class: str  # transformers' config class, for the export's config.json
    moe: bool = False
    qk_norm: bool = False
    # Llama 3.1's rotary embedding (LLaMARotaryEmbedding) pairs features (2i, 2i+1), so the
    # tables reorder q/k for Hugging Face's halves; every other block rotates halves.
    llama31_rope: bool = False
    # config.json's activation key and the one value the block computes.
    activation: tuple[str, str] = ("hidden_act", "silu")
    # The tables are those of a multimodal model, naming this text model's tensors under its
    # language model ("model.language_model."), where this architecture has "model.".
    text_of: str = ""
    # Biases on the attention's projections (and the experts'), which the block computes.
    biases: bool = False


FAMILIES = (
    Family("LlamaForCausalLM", "llama2", "llama3.1-8b", "LlamaConfig", llama31_rope=True),
    # Mistral's tensors are Llama's, by name and layout; MaxText has no Mistral table of its own.
    Family("MistralForCausalLM", "mistral", "llama3.1-8b", "MistralConfig"),
    Family("Qwen3ForCausalLM", "qwen3", "qwen3-0.6b", "Qwen3Config", qk_norm=True),
    Family("Qwen3MoeForCausalLM", "qwen3_moe", "qwen3-30b-a3b", "Qwen3MoeConfig", True, True),
    Family("MixtralForCausalLM", "mixtral", "mixtral-8x7b", "MixtralConfig", moe=True),
    # Gemma 3 1B, and text-only checkpoints of the larger ones (published with their vision
    # tower as Gemma3ForConditionalGeneration, which is not converted).
    Family(
        "Gemma3ForCausalLM",
        "gemma3",
        "gemma3-4b",
        "Gemma3TextConfig",
        qk_norm=True,
        activation=("hidden_activation", "gelu_pytorch_tanh"),
        text_of="model.language_model.",
    ),
    # gpt-oss 20b and 120b: attention sinks, biases, a 128-token window on every other layer,
    # YaRN, and the experts' clamped SwiGLU (maxtext/layers/moe.py, apply_ffn_activation).
    Family("GptOssForCausalLM", "gpt_oss", "gpt-oss-20b", "GptOssConfig", moe=True, biases=True),
    # DeepSeek V3 (and R1, V3.1, Kimi K2 as published in its form): latent attention, dense
    # layers first, shared experts, grouped sigmoid routing with a correction bias, YaRN.
    Family("DeepseekV3ForCausalLM", "deepseek", "deepseek3-671b", "DeepseekV3Config", moe=True),
)
BY_ARCHITECTURE = {f.architecture: f for f in FAMILIES}
BY_BLOCK = {f.block: f for f in FAMILIES}


def family_of(hf: dict[str, Any]) -> Family:
    arch = (hf.get("architectures") or ["?"])[0]
    if arch not in BY_ARCHITECTURE:
        raise UsageError(
            "config.json",
            f"import converts {', '.join(BY_ARCHITECTURE)}; this model is {arch}",
            MAXTEXT_CONVERTER,
        )
    return BY_ARCHITECTURE[arch]


def family_of_block(block: str) -> Family:
    if block not in BY_BLOCK:
        raise UsageError(
            "decoder_block",
            f"export writes decoder_block {', '.join(BY_BLOCK)}; this run's is {block}",
            "convert it with MaxText's own converter (python -m "
            "maxtext.checkpoint_conversion.to_huggingface, needs torch) and point vllm.model "
            "at its output",
        )
    return BY_BLOCK[block]


def maxtext_keys(hf: dict[str, Any]) -> dict[str, str]:
    """config.json -> the MaxText keys of the same model; what the family's block cannot
    compute is refused here, not found wrong after training."""
    family = family_of(hf)
    _refuse_what_the_block_lacks(family, hf)
    heads = int(hf["num_attention_heads"])
    tied = bool(hf.get("tie_word_embeddings", False))
    keys = {
        "decoder_block": family.block,
        "base_emb_dim": str(hf["hidden_size"]),
        "base_num_query_heads": str(heads),
        "base_num_kv_heads": str(hf.get("num_key_value_heads") or heads),
        "base_mlp_dim": str(hf["intermediate_size"]),
        "base_num_decoder_layers": str(hf["num_hidden_layers"]),
        "head_dim": str(hf.get("head_dim") or int(hf["hidden_size"]) // heads),
        "vocab_size": str(hf["vocab_size"]),
        "normalization_layer_epsilon": str(hf.get("rms_norm_eps", 1e-6)),
        **({} if family.block in BLOCK_KEYS else _rope_keys(family, hf)),
        "logits_via_embedding": str(tied).lower(),
        # MaxText divides tied logits by sqrt(emb_dim) by default; Hugging Face's lm_head is the
        # embedding as it is (Llama 3.2 1B and 3B, the small Qwen3 are tied). Gemma's tables
        # store the embedding times sqrt(emb_dim), which that division undoes.
        **({"normalize_embedding_logits": "false"} if tied and not family.text_of else {}),
        "scan_layers": "true",
    }
    if family.qk_norm:
        keys["use_qk_norm"] = "true"
    if family.moe:
        experts = hf.get("num_experts") or hf.get("num_local_experts") or hf.get("n_routed_experts")
        moe_dim = hf.get("moe_intermediate_size") or hf["intermediate_size"]
        keys |= {
            "num_experts": str(experts),
            "num_experts_per_tok": str(hf["num_experts_per_tok"]),
            "base_moe_mlp_dim": str(moe_dim),
            # Every layer is a MoE layer (checked above): MaxText sizes them by base_mlp_dim.
            "base_mlp_dim": str(moe_dim),
        }
        if "norm_topk_prob" in hf:  # Qwen3-MoE's; Mixtral always renormalizes the top k
            keys["norm_topk_prob"] = str(bool(hf["norm_topk_prob"])).lower()
    if family.block in BLOCK_KEYS:  # over the generic ones
        keys |= BLOCK_KEYS[family.block](hf)
    return keys


def _rope(hf: dict[str, Any]) -> tuple[float, str, dict[str, Any]]:
    """(theta, rope type, the scaling dict), from transformers 5's rope_parameters or 4's keys."""
    rope = hf.get("rope_parameters") or {**(hf.get("rope_scaling") or {})}
    theta = rope.get("rope_theta", hf.get("rope_theta", 10_000.0))
    return float(theta), str(rope.get("rope_type", rope.get("type", "default"))), rope


def _rope_keys(family: Family, hf: dict[str, Any]) -> dict[str, str]:
    return {"rope_max_timescale": str(int(_rope(hf)[0])), "rope_type": _rope_type(family, hf)}


def _rope_type(family: Family, hf: dict[str, Any]) -> str:
    _, kind, rope = _rope(hf)
    llama31 = {k: v for k, v in llama31_rope_scaling().items() if k in ROPE_SCALING_KEYS}
    if kind == "default":
        return "default"
    exact = all(rope.get(k) == v for k, v in llama31.items())
    if family.llama31_rope and kind == "llama3" and exact:
        return "llama3.1"
    computed = f"default, or Llama 3.1's {llama31}" if family.llama31_rope else "default"
    raise UsageError(
        "config.json",
        f"rope {kind} {rope} is not one MaxText's {family.block} block computes ({computed}; "
        "its Llama 3.1 scaling has factor 8 built in)",
        MAXTEXT_CONVERTER,
    )


def _refuse_what_the_block_lacks(family: Family, hf: dict[str, Any]) -> None:
    quantized = hf.get("quantization_config")
    if quantized:  # DeepSeek V3's FP8 with block scales, a GPTQ or AWQ checkpoint
        raise UsageError(
            "config.json",
            f"this checkpoint is quantized ({quantized.get('quant_method', quantized)}); "
            "import reads the weights as they are stored",
            "dequantize it to bfloat16 first (DeepSeek's inference/fp8_cast_bf16.py for its "
            "FP8 checkpoints) and import that",
        )
    act_key, act = family.activation
    unsupported = [
        f"{k}={hf.get(k)}"
        for k, ok in (
            (act_key, hf.get(act_key, act) == act),
            ("attention_bias", family.biases or not hf.get("attention_bias", False)),
            ("mlp_bias", family.biases or not hf.get("mlp_bias", False)),
        )
        if not ok
    ]
    if unsupported:
        raise UsageError(
            "config.json",
            f"MaxText's {family.block} block computes {act} without biases; this "
            f"{family.architecture} has {', '.join(unsupported)}",
            MAXTEXT_CONVERTER,
        )
    if family.block in BLOCK_KEYS:
        return  # its windows are the block's own: BLOCK_KEYS
    # Sliding-window attention: MaxText's Mistral and Qwen3 blocks attend to every earlier
    # token (they pass no attention_type), the same model only up to the window.
    window = hf.get("sliding_window") if hf.get("use_sliding_window", True) else None
    positions = int(hf.get("max_position_embeddings") or 0)
    if window and int(window) < positions:
        raise UsageError(
            "config.json",
            f"sliding_window={window}: this model attends to the last {window} tokens, and "
            f"MaxText's {family.block} block to every earlier one (the same model only on "
            f"sequences of at most {window} tokens)",
            f'if it will train and serve on at most {window} tokens, set "sliding_window": '
            f'null and "max_position_embeddings": {window} in config.json and import again',
        )
    if family.moe and (hf.get("mlp_only_layers") or int(hf.get("decoder_sparse_step", 1)) != 1):
        raise UsageError(
            "config.json",
            f"mlp_only_layers={hf.get('mlp_only_layers')}, decoder_sparse_step="
            f"{hf.get('decoder_sparse_step')}: MaxText's {family.block} block makes every "
            "layer a MoE layer",
            MAXTEXT_CONVERTER,
        )
    heads, head_dim = int(hf["num_attention_heads"]), hf.get("head_dim")
    if family.block == "mixtral" and head_dim and int(head_dim) * heads != int(hf["hidden_size"]):
        raise UsageError(  # MaxText's Mixtral shapes (hf_shape.py) take head_dim from these two
            "config.json",
            f"head_dim={head_dim} with {heads} heads is not hidden_size={hf['hidden_size']}, "
            "which MaxText's Mixtral tables assume",
            MAXTEXT_CONVERTER,
        )


# MaxText's Gemma 3 block: five sliding-window layers, then one global, repeated
# (maxtext/models/gemma3.py, GEMMA3_ATTENTION_PATTERN); config.json's layer_types.
GEMMA3_PATTERN = ("sliding_attention",) * 5 + ("full_attention",)


def gemma3_query_scalars(hidden_size: int, heads: int, head_dim: int) -> dict[str, int]:
    """MaxText's model name -> the query_pre_attn_scalar it computes: MaxText scales Gemma 3's
    queries by a rule keyed by the name (gemma3.get_query_pre_attn_scalar): head_dim**-0.5 for
    4b and 12b, (emb_dim / heads)**-0.5 for 27b."""
    return {"gemma3-4b": head_dim, "gemma3-27b": hidden_size // heads}


def gemma3_layer_types(layers: int) -> list[str]:
    return [GEMMA3_PATTERN[i % len(GEMMA3_PATTERN)] for i in range(layers)]


def gemma3_ropes(hf: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(global, local) rope of a Gemma 3 config.json: transformers 5's rope_parameters per
    layer type, or 4's rope_theta, rope_scaling and rope_local_base_freq."""
    per_type = hf.get("rope_parameters") or {}
    if "full_attention" in per_type:
        return dict(per_type["full_attention"]), dict(per_type.get("sliding_attention") or {})
    full = {"rope_theta": hf.get("rope_theta", 1_000_000.0), **(hf.get("rope_scaling") or {})}
    return full, {"rope_theta": hf.get("rope_local_base_freq", 10_000.0)}


def gemma3_keys(hf: dict[str, Any]) -> dict[str, str]:
    """The keys of MaxText's Gemma 3 block beyond the sizes; what it cannot compute refused."""
    layers, heads = int(hf["num_hidden_layers"]), int(hf["num_attention_heads"])
    types = list(hf.get("layer_types") or gemma3_layer_types(layers))
    refusals = []
    if types != gemma3_layer_types(layers):
        refusals.append(f"layer_types={types} (MaxText's: {', '.join(GEMMA3_PATTERN)}, repeated)")
    if layers < len(GEMMA3_PATTERN):  # its scanned layers are groups of the pattern's six
        refusals.append(f"num_hidden_layers={layers} (MaxText's block scans groups of six)")
    for cap in ("final_logit_softcapping", "attn_logit_softcapping"):
        if hf.get(cap) is not None:
            refusals.append(f"{cap}={hf[cap]} (Gemma 3 has none)")
    if not hf.get("tie_word_embeddings", True):
        refusals.append("tie_word_embeddings=false (MaxText's Gemma 3 tables have no lm_head)")
    full, local = gemma3_ropes(hf)
    for rope, allowed in ((full, ("default", "linear")), (local, ("default",))):
        if rope.get("rope_type", rope.get("type", "default")) not in allowed:
            refusals.append(f"rope {rope} (MaxText computes {' or '.join(allowed)} here)")
    head_dim = int(hf.get("head_dim") or int(hf["hidden_size"]) // heads)
    scalar = hf.get("query_pre_attn_scalar", head_dim)
    scalars = gemma3_query_scalars(int(hf["hidden_size"]), heads, head_dim)
    model_name = next((n for n, v in scalars.items() if v == scalar), None)
    if model_name is None:
        refusals.append(f"query_pre_attn_scalar={scalar} (MaxText's: head_dim or hidden/heads)")
    if refusals:
        raise UsageError(
            "config.json",
            f"MaxText's gemma3 block does not compute {'; '.join(refusals)}",
            MAXTEXT_CONVERTER,
        )
    return {
        # The model file gives the rest of the block (mlp_activations gelu and linear, the
        # vision tower's keys, unused); every key given here is over it.
        "model_name": str(model_name),
        "override_model_config": "true",
        "rope_type": "default",  # a rope per layer type, linear scaling on the global's
        "sliding_window_size": str(hf.get("sliding_window") or 4096),
        "use_post_attn_norm": "true",
        "use_post_ffw_norm": "true",
        "rope_max_timescale": str(int(float(full.get("rope_theta", 1_000_000.0)))),
        "local_rope_max_timescale": str(int(float(local.get("rope_theta", 10_000.0)))),
        "rope_linear_scaling_factor": str(float(full.get("factor", 1.0))
                                          if full.get("rope_type") == "linear" else 1.0),
    }  # fmt: skip


# MaxText's gpt-oss block: a sliding-window layer, then a global one, scanned in pairs
# (maxtext/models/gpt_oss.py, GPT_OSS_ATTENTION_PATTERN; its model file's
# inhomogeneous_layer_cycle_interval: 2).
GPT_OSS_PATTERN = ("sliding_attention", "full_attention")
GPT_OSS_SWIGLU_ALPHA = 1.702  # built into MaxText's clamped SwiGLU (moe.py, apply_ffn_activation)
# Hugging Face's YaRN keys -> MaxText's (base.yml's yarn RoPE parameters).
YARN_KEYS = {"factor": "rope_factor", "beta_fast": "beta_fast", "beta_slow": "beta_slow",
             "original_max_position_embeddings": "original_max_position_embeddings"}  # fmt: skip


def _yarn_keys(hf: dict[str, Any], also: tuple[str, ...] = ()) -> tuple[dict[str, str], list[str]]:
    """MaxText's YaRN keys of config.json's rope, and what of it MaxText cannot compute: another
    rope, a key beyond YARN_KEYS (and the block's own, `also`), a number not whole (MaxText's
    config model declares each of YaRN's an int: configs/types.py)."""
    theta, kind, rope = _rope(hf)
    refusals = []
    extra = sorted(set(rope) - {*YARN_KEYS, "rope_type", "type", "rope_theta", "truncate", *also})
    if kind != "yarn" or extra:
        refusals.append(f"rope {rope} (MaxText computes YaRN here, without {extra or 'others'})")
    fractional = [f"{k}={rope[k]}" for k in YARN_KEYS if k in rope and float(rope[k]) % 1]
    if fractional:
        refusals.append(f"rope {', '.join(fractional)} (MaxText's YaRN takes whole numbers)")
    keys = {
        "rope_type": "yarn",
        "rope_max_timescale": str(int(theta)),
        **{mt: str(int(float(rope[k]))) for k, mt in YARN_KEYS.items() if k in rope},
        "rope_truncate": str(bool(rope.get("truncate", True))).lower(),
    }
    return keys, refusals


def gpt_oss_layer_types(layers: int) -> list[str]:
    return [GPT_OSS_PATTERN[i % len(GPT_OSS_PATTERN)] for i in range(layers)]


def gpt_oss_keys(hf: dict[str, Any]) -> dict[str, str]:
    """The keys of MaxText's gpt-oss block beyond the sizes; what it cannot compute refused."""
    layers = int(hf["num_hidden_layers"])
    types = list(hf.get("layer_types") or gpt_oss_layer_types(layers))
    yarn, refusals = _yarn_keys(hf)
    if types != gpt_oss_layer_types(layers):
        refusals.append(f"layer_types={types} (MaxText's: {', '.join(GPT_OSS_PATTERN)}, repeated)")
    if layers % len(GPT_OSS_PATTERN):  # its scan drops a last odd layer
        refusals.append(f"num_hidden_layers={layers} (MaxText's block scans pairs of layers)")
    if float(hf.get("swiglu_alpha", GPT_OSS_SWIGLU_ALPHA)) != GPT_OSS_SWIGLU_ALPHA:
        refusals.append(f"swiglu_alpha={hf['swiglu_alpha']} (MaxText's: {GPT_OSS_SWIGLU_ALPHA})")
    if hf.get("tie_word_embeddings", False):
        refusals.append("tie_word_embeddings=true (MaxText's gpt-oss tables have an lm_head)")
    if refusals:
        raise UsageError(
            "config.json",
            f"MaxText's gpt_oss block does not compute {'; '.join(refusals)}",
            MAXTEXT_CONVERTER,
        )
    return {
        # The model file gives the rest of the block (attention_sink, attention_bias, mlp_bias,
        # routed_bias, mlp_activations, rope_interleave false, rope_attention_scaling true,
        # inhomogeneous_layer_cycle_interval 2); every key given here is over it.
        "model_name": "gpt-oss-20b",
        "override_model_config": "true",
        "sliding_window_size": str(hf.get("sliding_window") or 128),
        "mlp_activations_limit": str(float(hf.get("swiglu_limit", 7.0))),
        **yarn,
        "max_position_embeddings": str(hf.get("max_position_embeddings", 131072)),
    }


def deepseek_keys(hf: dict[str, Any]) -> dict[str, str]:
    """The keys of MaxText's DeepSeek V3 block beyond the sizes; what it cannot compute refused.
    MaxText routes as DeepSeek V3 by the model's name (layers/moe.py, get_topk: a model_name
    starting with deepseek3), and always renormalizes sigmoid scores over the top k."""
    _, _, rope = _rope(hf)
    yarn, refusals = _yarn_keys(hf, also=("mscale", "mscale_all_dim"))
    if hf.get("scoring_func", "sigmoid") != "sigmoid" or not hf.get("norm_topk_prob", True):
        routing = (
            f"scoring_func={hf.get('scoring_func')}, norm_topk_prob={hf.get('norm_topk_prob')}"
        )
        refusals.append(f"{routing} (MaxText's: sigmoid, renormalized)")
    # Hugging Face scales the softmax by mscale_all_dim's factor squared and the rotary output
    # by the ratio of mscale's factor to it (modeling_deepseek_v3.py, yarn_apply_mscale;
    # modeling_rope_utils.py, _compute_yarn_parameters); MaxText the softmax by its mscale's
    # and the output by 0.1 ln(factor) + 1 or not at all (attention_mla.py, embeddings.py).
    mscale, all_dim = float(rope.get("mscale") or 0), float(rope.get("mscale_all_dim") or 0)
    if all_dim and mscale and mscale != all_dim:
        refusals.append(
            f"rope {rope} (MaxText computes YaRN here, with mscale equal to mscale_all_dim, or "
            "without mscale_all_dim)"
        )
    positions = int(hf.get("max_position_embeddings", 163840))
    if all_dim and positions <= int(rope.get("original_max_position_embeddings", 4096)):
        refusals.append(
            f"max_position_embeddings={positions} with mscale_all_dim (MaxText scales the "
            "softmax only past original_max_position_embeddings)"
        )
    if hf.get("tie_word_embeddings", False):
        refusals.append("tie_word_embeddings=true (MaxText's DeepSeek tables have an lm_head)")
    if refusals:
        raise UsageError(
            "config.json",
            f"MaxText's deepseek block does not compute {'; '.join(refusals)}",
            MAXTEXT_CONVERTER,
        )
    groups = int(hf.get("n_group") or 1)
    return {
        "model_name": "deepseek3-671b",
        "override_model_config": "true",
        "base_mlp_dim": str(hf["intermediate_size"]),  # the dense layers'
        "first_num_dense_layers": str(hf.get("first_k_dense_replace", 0)),
        "shared_experts": str(hf.get("n_shared_experts") or 0),
        "routed_scaling_factor": str(float(hf.get("routed_scaling_factor", 1.0))),
        "n_routing_groups": str(groups if groups > 1 else -1),
        "topk_routing_group": str(int(hf.get("topk_group") or 1) if groups > 1 else -1),
        "q_lora_rank": str(hf.get("q_lora_rank") or 0),
        "kv_lora_rank": str(hf["kv_lora_rank"]),
        "qk_nope_head_dim": str(hf["qk_nope_head_dim"]),
        "qk_rope_head_dim": str(hf["qk_rope_head_dim"]),
        "v_head_dim": str(hf["v_head_dim"]),
        "rope_interleave": str(bool(hf.get("rope_interleave", True))).lower(),
        **yarn,
        "max_position_embeddings": str(positions),
        "mscale": str(all_dim),  # 0: no softmax scale
        # Without mscale_all_dim, Hugging Face scales the rotary output by 0.1 ln(factor) + 1.
        "rope_attention_scaling": str(not (all_dim and mscale)).lower(),
    }


# The blocks whose keys beyond the sizes (windows, ropes, the model file) one function gives.
BLOCK_KEYS: dict[str, Callable[[dict[str, Any]], dict[str, str]]] = {
    "gemma3": gemma3_keys,
    "gpt_oss": gpt_oss_keys,
    "deepseek": deepseek_keys,
}

# A MaxText key of a table: one parameter, or a composite key's several (gpt-oss's wi_0 and
# wi_1, one Hugging Face tensor).
MaxTextKey = str | tuple[str, ...]
Hooks = dict[MaxTextKey, list[Callable[..., Any]]]


def conversion_tables(
    family: Family, dims: dict[str, Any], config: Any, saving_to_hf: bool
) -> tuple[dict[MaxTextKey, Any], Hooks]:
    """(MaxText name -> its Hugging Face name(s): one, one per layer when scanned, one per
    expert (and layer); MaxText name -> the hooks to apply in order) for a model of `dims`
    (Hugging Face's config.json) and MaxText's `config` of the same model."""
    from maxtext.checkpoint_conversion.utils.param_mapping import HOOK_FNS, PARAM_MAPPING

    scan = bool(config.scan_layers)
    tables_dims = _as_multimodal(dims) if family.text_of else dims
    names = PARAM_MAPPING[family.tables_of](tables_dims, config, scan_layers=scan)
    hooks = HOOK_FNS[family.tables_of](
        tables_dims, config, scan_layers=scan, saving_to_hf=saving_to_hf
    )
    if family.text_of:
        names = {k: _renamed(v, family.text_of) for k, v in names.items() if "vision" not in k}
    chains = {k: list(v) if isinstance(v, list) else [v] for k, v in hooks.items()}
    rope_type = str(getattr(config.rope_type, "value", config.rope_type))  # pyconfig's enums
    if family.tables_of.startswith("llama3.1") and rope_type != "llama3.1":
        # The Llama 3.1 tables reorder q/k for its interleaved rotary pairs; the default
        # rotary embedding (Llama 2 and 3, Mistral) already rotates halves.
        chains = {k: [h for h in v if h.__name__ != "adjust_rope"] for k, v in chains.items()}
    if str(getattr(config, "model_name", "")).startswith(MOE_BIAS_VAR_MODELS):
        names = {_as_moe_bias_var(k): v for k, v in names.items()}
        chains = {_as_moe_bias_var(k): v for k, v in chains.items()}
    return names, chains


# MaxText keeps these models' routing bias in a collection of its own, MoEBiasVar, not params
# (layers/moe.py, GateLogit: model_name deepseek3, deepseek4, kimi-k2), though its DeepSeek
# table names it a parameter; the collection is stacked on axis 0 when scanned, not on
# param_scan_axis (checkpoint_conversion/to_maxtext.py, _build_single_axis_stacked_tensor).
MOE_BIAS_VAR_MODELS = ("deepseek3", "deepseek4", "kimi-k2")


def _as_moe_bias_var(key: Any) -> Any:
    if isinstance(key, str) and key.startswith("params-") and key.endswith("MoeBlock_0-gate-bias"):
        return "MoEBiasVar-" + key.removeprefix("params-")
    return key


def stacking_axis(mt_key: str, config: Any, ndim: int) -> int:
    """The axis a one-level list of Hugging Face names stacks on: layers on param_scan_axis when
    scanned (a collection other than params: axis 0), an unscanned layer's experts on 0."""
    scan_axis = int(config.param_scan_axis)
    scanned = bool(config.scan_layers) and mt_key.startswith("params-")
    return scan_axis if scanned and ndim > scan_axis else 0


def hf_shapes(family: Family, dims: dict[str, Any]) -> dict[str, Any]:
    """Hugging Face name -> its shape, by MaxText's table of the family."""
    from maxtext.checkpoint_conversion.utils.hf_shape import HF_SHAPE

    if not family.text_of:
        return HF_SHAPE[family.tables_of](dims)
    shapes = HF_SHAPE[family.tables_of](_as_multimodal(dims))
    text = family.text_of
    return {_renamed(k, text): v for k, v in shapes.items() if k.startswith(text)}


def _as_multimodal(dims: dict[str, Any]) -> dict[str, Any]:
    """A text model's config.json as the multimodal model's tables read one: the text model as
    text_config, a vision tower of no layers (whose names are dropped)."""
    vision = dict(hidden_size=1, intermediate_size=1, num_hidden_layers=0, patch_size=1,
                  num_channels=1, image_size=1)  # fmt: skip
    return {"text_config": dims, "vision_config": vision}


def _renamed(names: Any, text_of: str) -> Any:
    """A table's Hugging Face name(s), nested lists kept, with the text model's prefix."""
    if isinstance(names, list):
        return [_renamed(n, text_of) for n in names]
    return "model." + names.removeprefix(text_of) if names.startswith(text_of) else names


def llama31_rope_scaling() -> dict[str, Any]:
    """Llama 3.1's rotary scaling as MaxText's LLaMARotaryEmbedding computes it, in Hugging
    Face's config.json form (rope_type llama3 and the 8B's rope_theta included)."""
    from maxtext.checkpoint_conversion.utils.hf_model_configs import llama31_8b_config

    return dict(llama31_8b_config.rope_scaling)
