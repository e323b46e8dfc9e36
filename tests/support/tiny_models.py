"""Tiny models of the families `import` converts, made by transformers from each family's own
config class (random weights, two layers (Gemma 3: seven; gpt-oss: four), MoE with four
experts) and saved as save_pretrained saves them; transformers' forward pass over such a
directory, as the reference that MaxText's tokens are held to; and Gemma 3's published sizes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

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
    # Gemma 3 4B's ropes (linear scaling 8 on the global layers) and query scaling (by
    # head_dim); seven layers: a scanned group of MaxText's six and one more; a window of five
    # tokens, which a prompt longer than it crosses.
    "gemma3": ("Gemma3TextConfig", dict(
        num_hidden_layers=7, sliding_window=5, query_pre_attn_scalar=16,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0,
                                            "rope_theta": 1_000_000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}},
    )),
    # gpt-oss 20b's YaRN, sinks, biases and clamped SwiGLU (the config class's defaults); four
    # layers (two of MaxText's scanned pairs), a window of five tokens.
    "gpt-oss": ("GptOssConfig", dict(num_hidden_layers=4, num_local_experts=4,
                                     num_experts_per_tok=2, sliding_window=5)),
    # DeepSeek V3's latent attention (q_a/q_b, kv_a with its shared rotary key, kv_b), one
    # dense layer then two MoE ones (eight experts in four groups, two groups picked, one
    # shared expert), its sigmoid routing with a correction bias, its YaRN with mscale.
    "deepseek-v3": ("DeepseekV3Config", dict(
        num_hidden_layers=3, first_k_dense_replace=1, num_key_value_heads=4,
        n_routed_experts=8, n_group=4, topk_group=2, num_experts_per_tok=2, n_shared_experts=1,
        moe_intermediate_size=32, routed_scaling_factor=2.5, q_lora_rank=32, kv_lora_rank=16,
        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, head_dim=8,
        max_position_embeddings=163840,
        rope_parameters={"rope_type": "yarn", "factor": 40.0, "beta_fast": 32.0,
                         "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                         "original_max_position_embeddings": 4096, "rope_theta": 10000.0},
    )),
}  # fmt: skip


def tiny_model(
    family: str, directory: Path, seed: int = 5, std: float = 0.3, norms: float = 0.0,
    **config: Any,
):  # fmt: skip
    """The family's tiny model (`config` on top of its sizes), saved with a byte tokenizer
    (launcher.core.data.byte_tokenizer: UTF-8 bytes and a chat template); the model. `std`: the
    weights' spread, larger than the initializer's so that a wrong layout moves the logits;
    `norms`: the norm weights' mean (1: a model that trains as a pretrained one does)."""
    import torch
    import transformers

    from launcher.core.data.byte_tokenizer import byte_tokenizer_files

    config_class, extra = FAMILIES[family]
    made = getattr(transformers, config_class)(**{**SIZES, **extra, **config})
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(made).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(norms if "norm" in name else 0.0, std)
        for name, b in model.named_buffers():  # DeepSeek's routing bias is one
            if name.endswith("e_score_correction_bias"):
                b.normal_(0.0, std)
    model.save_pretrained(directory)
    byte_tokenizer_files(directory)
    return model


def parameter_count(directory: Path) -> int:
    from safetensors.numpy import load_file

    return sum(t.size for t in load_file(directory / "model.safetensors").values())


def logits_of(model, ids: list[int]) -> np.ndarray:
    """A transformers model's logits at every position of `ids`, in float64."""
    import torch

    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


def greedy_agreement(logits: np.ndarray, prompt: list[int], generated: list[int]) -> list[bool]:
    """For each generated token: is it the argmax after its prefix (teacher-forced)? `logits`:
    a reference's over the prompt and all but the last generated token."""
    picks = logits[len(prompt) - 1 :].argmax(axis=-1)
    return [int(a) == int(b) for a, b in zip(picks, generated, strict=True)]


# Gemma 3's published config.json files (google/gemma-3-1b-it; gemma-3-27b-it's text_config):
# the sizes that pick MaxText's query scaling, and the ropes.
GEMMA3_1B = {"architectures": ["Gemma3ForCausalLM"], "hidden_size": 1152, "num_attention_heads": 4,
             "num_key_value_heads": 1, "head_dim": 256, "query_pre_attn_scalar": 256,
             "num_hidden_layers": 26, "sliding_window": 512, "rope_theta": 1_000_000,
             "rope_local_base_freq": 10_000, "rope_scaling": None, "intermediate_size": 6912,
             "vocab_size": 262144}  # fmt: skip
GEMMA3_27B_TEXT = {**GEMMA3_1B, "hidden_size": 5376, "num_attention_heads": 32, "head_dim": 128,
                   "query_pre_attn_scalar": 168, "num_hidden_layers": 62, "sliding_window": 1024,
                   "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}  # fmt: skip


class Transformers:
    """transformers' own model of a saved directory, in float32."""

    def __init__(self, model_dir: Path):
        import transformers

        self.model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).float().eval()
        self.config = self.model.config

    def logits(self, ids: list[int]) -> np.ndarray:
        return logits_of(self.model, ids)

    def greedy_agreement(self, prompt: list[int], generated: list[int]) -> list[bool]:
        return greedy_agreement(self.logits([*prompt, *generated[:-1]]), prompt, generated)
