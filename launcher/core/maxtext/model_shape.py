"""Which model a job's arguments build, as far as its parameters are concerned: the MaxText keys
that decide the parameter tree (names and shapes) and what those parameters compute, with the
values MaxText itself will use (key=value, over the model_name's model file, over the config
file and its base_config chain; maxtext/configs/pyconfig.py merges them in that order).

A job that starts from another run's parameters must build the same model, or Orbax fails on
every host after minutes of start-up (a shape) or trains a different function (a rope, a norm).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from launcher.core.maxtext.args import MaxTextArgs, load_config_chain, maxtext_configs_dir

# The tree: which decoder block, its sizes, its layers' layout; then what the same tree computes.
MODEL_KEYS = (
    "model_name",
    "decoder_block",
    "base_emb_dim",
    "base_num_query_heads",
    "base_num_kv_heads",
    "base_mlp_dim",
    "base_num_decoder_layers",
    "head_dim",
    "vocab_size",
    "mlp_activations",
    "num_experts",
    "num_experts_per_tok",
    "base_moe_mlp_dim",
    "norm_topk_prob",
    "fused_qkv",
    "fused_mlp",
    "use_qk_norm",
    "scan_layers",
    "param_scan_axis",
    "logits_via_embedding",
    "normalize_embedding_logits",
    "normalization_layer_epsilon",
    "rope_type",
    "rope_max_timescale",
    # Gemma 3's block (launcher/runtime/models/families.py, gemma3_keys): its windows, ropes and
    # post-norms, and the switch that lets them stand over its model file's.
    "override_model_config",
    "sliding_window_size",
    "local_rope_max_timescale",
    "rope_linear_scaling_factor",
    "use_post_attn_norm",
    "use_post_ffw_norm",
    # gpt-oss's (gpt_oss_keys): its experts' clamp and YaRN.
    "mlp_activations_limit",
    "max_position_embeddings",
    "original_max_position_embeddings",
    "rope_factor",
    "beta_fast",
    "beta_slow",
    "rope_truncate",
    # DeepSeek V3's (deepseek_keys): its latent attention, dense layers, experts and routing.
    "first_num_dense_layers",
    "shared_experts",
    "routed_scaling_factor",
    "n_routing_groups",
    "topk_routing_group",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "rope_interleave",
    "mscale",
    "rope_attention_scaling",
    # The vocabulary the embedding rows stand for.
    "tokenizer_type",
    "tokenizer_path",
)


def _model_file(model_name: str) -> Path | None:
    # MaxText reads an -Instruct model's architecture from its base model's file.
    name = model_name.replace("-Instruct", "")
    path = maxtext_configs_dir() / "models" / f"{name}.yml"
    return path if name != "default" and path.is_file() else None


def model_values(args: MaxTextArgs) -> dict[str, Any]:
    """The MODEL_KEYS of `args` as MaxText will set them."""
    chain = args.config_values
    model_name = str(args.get("model_name") or "default")
    model_file = _model_file(model_name)
    from_model = load_config_chain(model_file) if model_file else {}
    values = {}
    for key in MODEL_KEYS:
        if key in args.overrides:
            values[key] = args.get(key)
        elif key in from_model:
            values[key] = from_model[key]
        else:
            values[key] = chain.get(key)
    return values


def same_value(a: Any, b: Any) -> bool:
    """One value as YAML and the command line may spell it: 1.e-05 and 1e-5, 64 and "64",
    true and True."""
    if isinstance(a, bool) or isinstance(b, bool):
        return str(a).lower() == str(b).lower()
    try:
        return math.isclose(float(str(a).replace("_", "")), float(str(b).replace("_", "")))
    except ValueError:
        return str(a).strip() == str(b).strip()


def spelled(value: Any) -> str:
    """A value as a key=value argument spells it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(f"'{v}'" if isinstance(v, str) else str(v) for v in value) + "]"
    return str(value)
