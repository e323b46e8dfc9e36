"""MaxText's Llama conversion tables (maxtext.checkpoint_conversion), as `export` (MaxText ->
Hugging Face) and `import` (Hugging Face -> MaxText) both apply them, without the torch
MaxText's converters need: the parameter names, the hooks between layouts, and Llama 3.1's
rotary scaling."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The keys of MaxText's Llama 3.1 rotary scaling as Hugging Face's config.json names them
# (rope_type and rope_theta aside).
ROPE_SCALING_KEYS = (
    "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings",
)  # fmt: skip


def llama_tables(
    dims: dict[str, Any], scan_layers: bool, rope_type: str, saving_to_hf: bool
) -> tuple[dict[str, Any], dict[str, list[Callable[..., Any]]]]:
    """(MaxText name -> its Hugging Face name, or one per layer when scanned; MaxText name ->
    the hooks to apply in order) for a Llama of `dims` (Hugging Face's size names)."""
    from maxtext.checkpoint_conversion.utils.param_mapping import (
        LLAMA31_MAXTEXT_TO_HF_PARAM_HOOK_FN,
        LLAMA31_MAXTEXT_TO_HF_PARAM_MAPPING,
    )

    names = LLAMA31_MAXTEXT_TO_HF_PARAM_MAPPING(dims, None, scan_layers=scan_layers)
    hooks = LLAMA31_MAXTEXT_TO_HF_PARAM_HOOK_FN(
        dims, None, scan_layers=scan_layers, saving_to_hf=saving_to_hf
    )
    chains = {k: list(v) if isinstance(v, list) else [v] for k, v in hooks.items()}
    if rope_type != "llama3.1":
        # The tables are Llama 3.1's, whose rotary embedding (LLaMARotaryEmbedding) pairs
        # features (2i, 2i+1) and so reorders q/k for Hugging Face's halves; the default one
        # (RotaryEmbedding, Llama 2 and 3) already rotates halves: no reordering.
        chains = {k: [h for h in v if h.__name__ != "adjust_rope"] for k, v in chains.items()}
    return names, chains


def llama31_rope_scaling() -> dict[str, Any]:
    """Llama 3.1's rotary scaling as MaxText's LLaMARotaryEmbedding computes it, in Hugging
    Face's config.json form (rope_type llama3 and the 8B's rope_theta included)."""
    from maxtext.checkpoint_conversion.utils.hf_model_configs import llama31_8b_config

    return dict(llama31_8b_config.rope_scaling)
