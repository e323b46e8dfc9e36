"""Hugging Face's LlamaForCausalLM forward pass, written out in numpy (float64), to read an
exported model directory the way transformers and vLLM read it: no MaxText and no torch
involved. The semantics are transformers' `modeling_llama.py`: RMSNorm (x / rms * weight),
rotary embedding on halves (`rotate_half`, inverse frequencies theta^(-2i/d)), grouped-query
attention scaled by 1/sqrt(head_dim) with a causal mask, a SiLU-gated MLP, `lm_head`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.support.tiny_models import greedy_agreement


class HfLlama:
    def __init__(self, model_dir: Path):
        from safetensors.numpy import load_file

        self.config = json.loads((model_dir / "config.json").read_text())
        self.w = {
            k: v.astype(np.float64) for k, v in load_file(model_dir / "model.safetensors").items()
        }

    def _norm(self, x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        eps = self.config["rms_norm_eps"]
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight

    def _rope(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        d = x.shape[-1]
        theta = self.config["rope_parameters"]["rope_theta"]
        inv_freq = theta ** (-np.arange(0, d, 2) / d)
        angles = positions[:, None] * inv_freq[None, :]
        cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]
        sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
        rotated = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], axis=-1)
        return x * cos + rotated * sin

    def logits(self, ids: list[int]) -> np.ndarray:
        """[len(ids), vocab]: the next-token logits after each prefix."""
        c, w = self.config, self.w
        n, hd = len(ids), c["head_dim"]
        heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        positions = np.arange(n, dtype=np.float64)
        x = w["model.embed_tokens.weight"][ids]
        causal = np.triu(np.full((n, n), -np.inf), k=1)
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = self._norm(x, w[p + "input_layernorm.weight"])
            q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, heads, hd)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, kv_heads, hd)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, kv_heads, hd)
            q, k = self._rope(q, positions), self._rope(k, positions)
            k = np.repeat(k, heads // kv_heads, axis=1)
            v = np.repeat(v, heads // kv_heads, axis=1)
            scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + causal
            probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs /= probs.sum(axis=-1, keepdims=True)
            attn = np.einsum("hqk,khd->qhd", probs, v).reshape(n, heads * hd)
            x = x + attn @ w[p + "self_attn.o_proj.weight"].T
            h = self._norm(x, w[p + "post_attention_layernorm.weight"])
            gate = h @ w[p + "mlp.gate_proj.weight"].T
            up = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
        x = self._norm(x, w["model.norm.weight"])
        head = w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else w["lm_head.weight"]
        return x @ head.T

    def greedy_agreement(self, prompt: list[int], generated: list[int]) -> list[bool]:
        return greedy_agreement(self.logits([*prompt, *generated[:-1]]), prompt, generated)


def write_tiny_llama(
    directory: Path, seed: int = 0, tie_word_embeddings: bool = False, max_positions: int = 128
) -> Path:
    """A Llama model directory as Hugging Face's save_pretrained writes one: transformers'
    own LlamaConfig as config.json, random weights under Hugging Face's names in
    model.safetensors, and a tokenizer (UTF-8 bytes). The weights come from numpy, not from
    LlamaForCausalLM(config): the reference it is held to is numpy too, not torch."""
    import transformers
    from safetensors.numpy import save_file

    from launcher.core.data.byte_tokenizer import byte_tokenizer_files

    directory.mkdir(parents=True, exist_ok=True)
    e, m, v, layers, heads, kv_heads, hd = 64, 128, 256, 2, 4, 2, 16
    config = transformers.LlamaConfig(
        architectures=["LlamaForCausalLM"], vocab_size=v, hidden_size=e, intermediate_size=m,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=hd, max_position_embeddings=max_positions, rms_norm_eps=1e-5,
        tie_word_embeddings=tie_word_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
    )  # fmt: skip
    (directory / "config.json").write_text(config.to_json_string())
    rng = np.random.default_rng(seed)

    def r(*shape: int, base: float = 0.0) -> np.ndarray:
        return (base + 0.1 * rng.standard_normal(shape)).astype(np.float32)

    tensors = {"model.embed_tokens.weight": r(v, e), "model.norm.weight": r(e, base=1)}
    if not tie_word_embeddings:
        tensors["lm_head.weight"] = r(v, e)
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors |= {
            p + "self_attn.q_proj.weight": r(heads * hd, e),
            p + "self_attn.k_proj.weight": r(kv_heads * hd, e),
            p + "self_attn.v_proj.weight": r(kv_heads * hd, e),
            p + "self_attn.o_proj.weight": r(e, heads * hd),
            p + "mlp.gate_proj.weight": r(m, e),
            p + "mlp.up_proj.weight": r(m, e),
            p + "mlp.down_proj.weight": r(e, m),
            p + "input_layernorm.weight": r(e, base=1),
            p + "post_attention_layernorm.weight": r(e, base=1),
        }
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    byte_tokenizer_files(directory)
    return directory
