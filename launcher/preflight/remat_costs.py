"""What a remat policy costs a training step: the FLOPs the backward pass computes again, and
the activations it keeps in HBM instead.

MaxText's TFLOP/s (and MFU) count model FLOPs: forward once, backward twice. With
rematerialization the chip also re-runs the forward of every matmul whose output the policy did
not keep, once per layer and step; what it keeps stays in HBM from the forward to the backward.
Both are counted here for a dense decoder layer (q, k, v, out, the MLP's wi and wo, the
attention context) from the model's dimensions, the way MaxText's
`calculate_tflops_training_per_device` counts FLOPs. For other blocks (mixture of experts) it is
the same dense estimate: an approximation the calibrated step model absorbs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

# The tensors MaxText's remat policies name, and which of them each policy keeps (saved on the
# device or offloaded to the host): the rest of a layer's forward runs again in the backward.
TENSORS = ("query_proj", "key_proj", "value_proj", "out_proj", "mlpwi", "mlpwo", "context")
_ALL = frozenset(TENSORS)
_QKV = frozenset({"query_proj", "key_proj", "value_proj"})
KEPT_BY_POLICY: dict[str, frozenset[str]] = {
    "minimal": _ALL - {"context"},
    "minimal_with_context": _ALL,
    "minimal_offloaded": _ALL - {"context"},
    "save_dot_with_context_except_mlp": _ALL - {"mlpwi", "mlpwo"},
    "save_dot_except_mlpwi": _ALL - {"mlpwi", "context"},
    "save_dot_except_mlp": _ALL - {"mlpwi", "mlpwo", "context"},
    "save_qkv_proj": _QKV,
    "qkv_proj_offloaded": _QKV,
    "save_out_proj": frozenset({"out_proj"}),
    "full": frozenset(),
}
# Policies that move what they keep to the host: it costs no HBM.
OFFLOADED = frozenset({"minimal_offloaded", "qkv_proj_offloaded"})
BYTES_PER_ACTIVATION = 2  # bf16


@dataclass(frozen=True)
class ModelDims:
    """What the costs depend on, read from MaxText's config (the probe writes it)."""

    emb_dim: int
    mlp_dim: int
    num_query_heads: int
    num_kv_heads: int
    head_dim: int
    num_decoder_layers: int
    mlp_activations: int  # wi matrices (2 for a gated MLP)
    max_target_length: int
    per_device_batch_size: float
    remat_policy: str
    kept_custom: tuple[str, ...] = ()  # the tensors a `custom` policy keeps

    @classmethod
    def of(cls, config: Any) -> ModelDims:
        kept = [
            name
            for name in TENSORS
            if all(
                getattr(config, part, "remat") in ("device", "offload")
                for part in (("mlpwi_0", "mlpwi_1") if name == "mlpwi" else (name,))
            )
        ]
        return cls(
            emb_dim=config.emb_dim,
            mlp_dim=config.mlp_dim,
            num_query_heads=config.num_query_heads,
            num_kv_heads=config.num_kv_heads,
            head_dim=config.head_dim,
            num_decoder_layers=config.num_decoder_layers,
            mlp_activations=len(config.mlp_activations),
            max_target_length=config.max_target_length,
            per_device_batch_size=float(config.per_device_batch_size),
            remat_policy=str(config.remat_policy),
            kept_custom=tuple(kept),
        )

    def with_job(self, remat_policy: str, per_device_batch_size: float) -> ModelDims:
        return replace(self, remat_policy=remat_policy, per_device_batch_size=per_device_batch_size)

    @property
    def tokens_per_device(self) -> float:
        return self.per_device_batch_size * self.max_target_length

    def kept(self) -> frozenset[str]:
        if self.remat_policy == "custom":
            return frozenset(self.kept_custom)
        return KEPT_BY_POLICY.get(self.remat_policy, frozenset())

    def forward_flops_per_token(self) -> dict[str, float]:
        """One layer's forward FLOPs per token, by tensor, as MaxText counts them."""
        d, hd = self.emb_dim, self.head_dim
        hq, hkv = self.num_query_heads, self.num_kv_heads
        return {
            "query_proj": 2 * d * hq * hd,
            "key_proj": 2 * d * hkv * hd,
            "value_proj": 2 * d * hkv * hd,
            "out_proj": 2 * hq * hd * d,
            "mlpwi": 2 * d * self.mlp_dim * self.mlp_activations,
            "mlpwo": 2 * self.mlp_dim * d,
            # q.k and p.v over the sequence, halved by the causal mask
            "context": 2 * self.max_target_length * hq * hd,
        }

    def elements_per_token(self) -> dict[str, float]:
        """Each tensor's output per token (what keeping it holds)."""
        hq, hkv, hd = self.num_query_heads, self.num_kv_heads, self.head_dim
        return {
            "query_proj": hq * hd,
            "key_proj": hkv * hd,
            "value_proj": hkv * hd,
            "out_proj": self.emb_dim,
            "mlpwi": self.mlp_dim * self.mlp_activations,
            "mlpwo": self.emb_dim,
            "context": hq * hd,
        }

    def remat_flops(self) -> float:
        """FLOPs one step recomputes per device because of the remat policy."""
        kept = self.kept()
        per_token = sum(f for k, f in self.forward_flops_per_token().items() if k not in kept)
        return per_token * self.tokens_per_device * self.num_decoder_layers

    def kept_bytes(self) -> float:
        """HBM per device for what the policy keeps beyond the layer inputs every policy keeps
        (an estimate: the hidden dimensions are taken as sharded as the batch is)."""
        if self.remat_policy in OFFLOADED:
            return 0.0
        kept = self.kept()
        per_token = sum(n for k, n in self.elements_per_token().items() if k in kept)
        return per_token * BYTES_PER_ACTIVATION * self.tokens_per_device * self.num_decoder_layers
