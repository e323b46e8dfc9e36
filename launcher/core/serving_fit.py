"""Will a model serve on a slice with vLLM? Its weights and one full-length sequence's KV cache
against the slice's HBM, per host, before any pod starts; and the smallest slice that fits.

The rule is vLLM's own: the engine refuses to start when the memory it may use
(`gpu_memory_utilization` of each device's HBM) cannot hold the weights and the KV cache of
one request of `max_model_len` tokens ("To serve at least one request with the model's max seq
len ... KV cache is needed, which is larger than the available KV cache memory"). Whatever is
left holds more sequences at once: that figure is printed, not required, unless `max_num_seqs`
is given. vLLM also requires the attention heads to divide evenly over the tensor-parallel
devices, and replicates KV heads when there are fewer of them than devices (its
`ModelConfig.verify_with_parallel_config` and `get_num_kv_heads`). Activations and the XLA
compiler's scratch are not modelled: they come out of the (1 - utilization) headroom.

Pure Python: the workstation client and the chart's checks share it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.core.errors import UsageError
from launcher.core.tpu.table import GENERATIONS, SliceShape, slice_shape, tpu_type

GIB = 1 << 30
# vLLM's default share of each device's HBM the engine may use (EngineArgs
# gpu_memory_utilization, 0.9; the TPU backend reads the same argument).
DEFAULT_UTILIZATION = 0.9
# Bytes per weight (or KV element) of the dtypes and quantizations vLLM's TPU backend serves.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1, "fp8": 1, "int4": 0.5}


# Published configs (config.json of meta-llama/Llama-3.1-8B, -70B and -405B, Qwen/Qwen3-8B and
# Qwen3-30B-A3B, mistralai/Mistral-7B-v0.3 and Mixtral-8x7B-v0.1, deepseek-ai/DeepSeek-V3 (its
# multi-token-prediction layer, which vLLM loads only to speculate, left out) on Hugging Face),
# for sizing a slice before the model is in the bucket: `tpu-launcher serve-fit llama3.1-70b`.
KNOWN_MODELS: dict[str, dict[str, Any]] = {
    "llama3.1-8b": dict(
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        vocab_size=128256,
        torch_dtype="bfloat16",
    ),
    "llama3.1-70b": dict(
        hidden_size=8192,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        intermediate_size=28672,
        vocab_size=128256,
        torch_dtype="bfloat16",
    ),
    "llama3.1-405b": dict(
        hidden_size=16384,
        num_hidden_layers=126,
        num_attention_heads=128,
        num_key_value_heads=8,
        intermediate_size=53248,
        vocab_size=128256,
        torch_dtype="bfloat16",
    ),
    "qwen3-8b": dict(
        architectures=["Qwen3ForCausalLM"],
        hidden_size=4096,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=12288,
        vocab_size=151936,
        torch_dtype="bfloat16",
    ),
    "qwen3-30b-a3b": dict(
        architectures=["Qwen3MoeForCausalLM"],
        hidden_size=2048,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        intermediate_size=6144,
        moe_intermediate_size=768,
        num_experts=128,
        num_experts_per_tok=8,
        vocab_size=151936,
        torch_dtype="bfloat16",
    ),
    "mistral-7b": dict(
        architectures=["MistralForCausalLM"],
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=32768,
        torch_dtype="bfloat16",
    ),
    "deepseek-v3": dict(
        architectures=["DeepseekV3ForCausalLM"],
        hidden_size=7168,
        num_hidden_layers=61,
        num_attention_heads=128,
        num_key_value_heads=128,
        intermediate_size=18432,
        moe_intermediate_size=2048,
        n_routed_experts=256,
        n_shared_experts=1,
        num_experts_per_tok=8,
        first_k_dense_replace=3,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        vocab_size=129280,
        torch_dtype="bfloat16",
    ),
    # google/gemma-3-1b-it's config.json (tied: Gemma3TextConfig's default).
    "gemma-3-1b": dict(
        architectures=["Gemma3ForCausalLM"],
        hidden_size=1152,
        num_hidden_layers=26,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=256,
        intermediate_size=6912,
        sliding_window=512,
        vocab_size=262144,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
    ),
    # openai/gpt-oss-20b's config.json (-120b's below).
    "gpt-oss-20b": dict(
        architectures=["GptOssForCausalLM"],
        hidden_size=2880,
        num_hidden_layers=24,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        intermediate_size=2880,
        num_local_experts=32,
        num_experts_per_tok=4,
        attention_bias=True,
        sliding_window=128,
        vocab_size=201088,
        torch_dtype="bfloat16",
    ),
    "mixtral-8x7b": dict(
        architectures=["MixtralForCausalLM"],
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        num_local_experts=8,
        num_experts_per_tok=2,
        vocab_size=32000,
        torch_dtype="bfloat16",
    ),
}
# openai/gpt-oss-120b's config.json: gpt-oss-20b's with more layers and experts.
KNOWN_MODELS["gpt-oss-120b"] = {
    **KNOWN_MODELS["gpt-oss-20b"], "num_hidden_layers": 36, "num_local_experts": 128,
}  # fmt: skip


@dataclass(frozen=True)
class ModelSize:
    """What the fit needs of a model: parameters, attention shape, layers."""

    name: str
    parameters: int  # every weight: what the hosts hold (all of a MoE's experts)
    active_parameters: int  # what one token computes with (a MoE's routed experts only)
    layers: int
    attention_heads: int
    kv_heads: int  # what vLLM caches per token and layer: KV heads of head_dim elements,
    head_dim: int
    kv_tensors: int = 2  # K and V; MLA caches one latent (one head of its own size) instead

    def kv_bytes_per_token(self, kv_dtype_bytes: float, tensor_parallel: int) -> float:
        """The KV cache of every layer for one token, over the whole tensor-parallel group:
        vLLM keeps at least one KV head per device, so past the model's KV heads they
        replicate (an MLA latent is one head: every device holds it whole)."""
        heads = max(self.kv_heads, tensor_parallel)
        return self.kv_tensors * self.layers * heads * self.head_dim * kv_dtype_bytes


def model_size(config: dict[str, Any], name: str = "model") -> ModelSize:
    """The size of a Hugging Face decoder (Llama's layout and its kin: Llama, Mistral, Qwen3,
    Gemma 3, and the MoE ones, Qwen3-MoE, Mixtral, gpt-oss and DeepSeek V2/V3) from its
    config.json: embeddings, per layer the attention projections (grouped KV heads, Qwen3's and
    Gemma 3's per-head q/k norms, gpt-oss's biases and sinks, DeepSeek's latent attention), a
    gated MLP, or a router
    and its experts' gated MLPs (gpt-oss's biased, DeepSeek's shared experts and its
    first_k_dense_replace dense layers), and two norms (Gemma 3: four), the
    final norm, and an untied output head unless `tie_word_embeddings`."""
    try:
        hidden = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        inter = int(config["intermediate_size"])
        vocab = int(config["vocab_size"])
    except (KeyError, TypeError, ValueError) as err:
        raise UsageError(
            field=f"{name}: config.json",
            problem=f"has no usable {err} (a Llama-layout decoder's sizes are needed)",
            fix="point at a Hugging Face model directory whose config.json has hidden_size, "
            "num_hidden_layers, num_attention_heads, intermediate_size and vocab_size",
        ) from None
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    kv_tensors = 2
    if config.get("kv_lora_rank"):
        attention, kv_heads, head_dim = _mla(config, hidden, heads)
        kv_tensors = 1
    else:
        attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    architectures = config.get("architectures") or []
    gemma3 = any(a.startswith("Gemma3") for a in architectures)
    if gemma3 or any(a.startswith("Qwen3") for a in architectures):
        attention += 2 * head_dim  # q_norm, k_norm
    norms = 4 if gemma3 else 2  # Gemma 3's post-attention and post-MLP norms too
    gpt_oss = "GptOssForCausalLM" in architectures  # its sinks, and biases on every expert
    if config.get("attention_bias"):
        attention += heads * head_dim + 2 * kv_heads * head_dim + hidden
    if gpt_oss:
        attention += heads  # one sink a head
    dense = 3 * hidden * inter
    experts = int(
        config.get("num_experts")
        or config.get("num_local_experts")
        or config.get("n_routed_experts")
        or 0
    )
    moe_layers = mlp = active_mlp = 0  # the MoE layers, and each one's parameters
    if experts > 1:  # Qwen3-MoE names the experts' size apart; Mixtral's is intermediate_size
        expert = 3 * hidden * int(config.get("moe_intermediate_size") or inter)
        routed = int(config.get("num_experts_per_tok") or 1)
        router = hidden * experts
        if gpt_oss:  # the router's bias; each expert's on gate_up and down
            router += experts
            expert += 2 * int(config["intermediate_size"]) + hidden
        if config.get("n_routed_experts"):  # DeepSeek: the router's bias, shared experts
            router += experts
            router += int(config.get("n_shared_experts") or 0) * expert
        mlp, active_mlp = router + experts * expert, router + routed * expert
        moe_layers = layers - int(config.get("first_k_dense_replace") or 0)
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    dense_layers = layers - moe_layers
    rest = layers * (attention + norms * hidden) + embeddings + hidden + dense_layers * dense
    return ModelSize(
        name=name,
        parameters=rest + moe_layers * mlp,
        active_parameters=rest + moe_layers * active_mlp,
        layers=layers,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        kv_tensors=kv_tensors,
    )


def _mla(config: dict[str, Any], hidden: int, heads: int) -> tuple[int, int, int]:
    """DeepSeek's multi-head latent attention: (its parameters a layer, the KV heads and head
    size vLLM caches). Queries through a low-rank q_a/q_b pair (or one projection without
    q_lora_rank), keys and values from a compressed latent of kv_lora_rank plus the shared
    rotary key; vLLM caches that latent alone, as one head of kv_lora_rank + qk_rope_head_dim
    (ModelConfig.get_num_kv_heads and get_head_size with use_mla; MLAAttentionSpec)."""
    rank, rope = int(config["kv_lora_rank"]), int(config["qk_rope_head_dim"])
    nope, value = int(config["qk_nope_head_dim"]), int(config["v_head_dim"])
    q_rank = int(config.get("q_lora_rank") or 0)
    query = heads * (nope + rope)
    q = hidden * q_rank + q_rank + q_rank * query if q_rank else hidden * query
    kv = hidden * (rank + rope) + rank + rank * heads * (nope + value)
    return q + kv + heads * value * hidden, 1, rank + rope


def read_model(path: str | Path) -> tuple[ModelSize, str]:
    """A model directory's (or its config.json's) size and the dtype it was saved in."""
    where = Path(path)
    file = where / "config.json" if where.is_dir() else where
    try:
        text = file.read_text()
    except FileNotFoundError:
        raise UsageError(
            field=str(path),
            problem="has no config.json",
            fix="point at a Hugging Face model directory (what `tpu-launcher export` writes, "
            "<run>/hf/<step>), or at its config.json",
        ) from None
    return parse_config(text, str(file), where.name if where.is_dir() else where.parent.name)


def parse_config(text: str, where: str, name: str) -> tuple[ModelSize, str]:
    """A config.json's text (read from `where`) as the model's size and its saved dtype."""
    try:
        config = json.loads(text)
    except ValueError as err:
        raise UsageError(where, f"cannot be read as JSON ({err})", "re-export it") from None
    return sized(config, name)


def sized(config: dict[str, Any], name: str) -> tuple[ModelSize, str]:
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return model_size(config, name=name), dtype


@dataclass(frozen=True)
class ServingFit:
    """One model on one slice: what each host must hold and what it has."""

    model: ModelSize
    shape: SliceShape
    weight_bytes_per_param: float
    kv_bytes_per_elem: float
    max_model_len: int
    max_num_seqs: int | None
    utilization: float

    @property
    def tensor_parallel(self) -> int:
        """vLLM's tensor-parallel devices: every device of the slice (one group, all hosts)."""
        return self.shape.devices

    @property
    def weights(self) -> float:
        return self.model.parameters * self.weight_bytes_per_param

    @property
    def kv_per_sequence(self) -> float:
        per_token = self.model.kv_bytes_per_token(self.kv_bytes_per_elem, self.tensor_parallel)
        return per_token * self.max_model_len

    @property
    def usable(self) -> float:
        """What vLLM may use on the whole slice: the utilization of every chip's HBM."""
        return self.shape.chips * self.shape.generation.hbm_gib * GIB * self.utilization

    @property
    def sequences(self) -> int:
        """Full-length sequences the KV cache left after the weights holds at once."""
        return max(0, int((self.usable - self.weights) // self.kv_per_sequence))

    @property
    def heads_divide(self) -> bool:
        return self.model.attention_heads % self.tensor_parallel == 0

    @property
    def fits(self) -> bool:
        wanted = self.max_num_seqs or 1
        return self.heads_divide and self.sequences >= wanted

    def per_host(self, total: float) -> float:
        return total / self.shape.hosts

    def lines(self) -> list[str]:
        s, g = self.shape, self.shape.generation
        need = self.weights + self.kv_per_sequence * (self.max_num_seqs or 1)
        return [
            f"{self.model.name}: {self.model.parameters / 1e9:.2f}B parameters"
            + (
                f" ({self.model.active_parameters / 1e9:.2f}B active per token)"
                if self.model.active_parameters != self.model.parameters
                else ""
            )
            + ", "
            f"{self.weights / GIB:.1f} GiB of weights at {self.weight_bytes_per_param:g} "
            f"bytes each; KV cache {self.kv_per_sequence / GIB:.2f} GiB per "
            f"{self.max_model_len}-token sequence",
            f"{s.name}: {s.hosts} host(s) x {s.chips_per_host} chips x {g.hbm_gib:g} GiB HBM, "
            f"{self.utilization:.0%} usable: {self.per_host(self.usable) / GIB:.1f} GiB per "
            f"host; tensor parallel {self.tensor_parallel}",
            f"per host: weights {self.per_host(self.weights) / GIB:.1f} GiB + KV "
            f"{self.per_host(need - self.weights) / GIB:.1f} GiB for "
            f"{self.max_num_seqs or 1} sequence(s) = {self.per_host(need) / GIB:.1f} GiB; "
            f"{self.sequences} full-length sequence(s) fit at once",
        ]


def fit(
    model: ModelSize,
    shape: SliceShape,
    *,
    dtype: str = "bfloat16",
    kv_dtype: str | None = None,
    max_model_len: int = 4096,
    max_num_seqs: int | None = None,
    utilization: float = DEFAULT_UTILIZATION,
) -> ServingFit:
    for key, value in (("--dtype", dtype), ("--kv-cache-dtype", kv_dtype or dtype)):
        if value not in DTYPE_BYTES:
            raise UsageError(key, f"unknown dtype {value!r}", f"one of {', '.join(DTYPE_BYTES)}")
    if not 0 < utilization <= 1:
        raise UsageError("--gpu-memory-utilization", f"{utilization} is not in (0, 1]", "use 0.9")
    # A float32 checkpoint is served in bfloat16 (vLLM's "auto" dtype on TPU); the KV cache
    # is kept in the model's dtype unless told otherwise (int8 weights keep a bf16 cache).
    weight = "bfloat16" if dtype == "float32" else dtype
    kv = kv_dtype or ("bfloat16" if DTYPE_BYTES[weight] < 2 else weight)
    return ServingFit(
        model=model,
        shape=shape,
        weight_bytes_per_param=DTYPE_BYTES[weight],
        kv_bytes_per_elem=DTYPE_BYTES[kv],
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        utilization=utilization,
    )


def slices_of(generation: str) -> list[SliceShape]:
    """Every slice of a generation the table names, smallest first (the default host size)."""
    gen = GENERATIONS[generation]
    return sorted((slice_shape(gen.name, t) for t in gen.topologies), key=lambda s: s.chips)


def smallest_fit(model: ModelSize, generation: str, **options: Any) -> ServingFit | None:
    """The smallest slice of `generation` the model serves on, or None when none does."""
    for shape in slices_of(generation):
        candidate = fit(model, shape, **options)
        if candidate.fits:
            return candidate
    return None


def check(model: ModelSize, shape: SliceShape | str, **options: Any) -> ServingFit:
    """The fit on a slice (or its Cloud TPU name); raises UsageError naming one that fits."""
    shape = tpu_type(shape) if isinstance(shape, str) else shape
    result = fit(model, shape, **options)
    if result.fits:
        return result
    if not result.heads_divide:
        problem = (
            f"{model.attention_heads} attention heads do not divide over the slice's "
            f"{result.tensor_parallel} tensor-parallel devices (vLLM requires it)"
        )
    else:
        need = result.weights + result.kv_per_sequence * (result.max_num_seqs or 1)
        problem = (
            f"needs {result.per_host(need) / GIB:.1f} GiB per host (weights "
            f"{result.weights / GIB:.1f} GiB and the KV cache of "
            f"{result.max_num_seqs or 1} {result.max_model_len}-token sequence(s), over "
            f"{shape.hosts} host(s)); {shape.name} has "
            f"{result.per_host(result.usable) / GIB:.1f} GiB per host usable"
        )
    better = smallest_fit(model, shape.generation.name, **options)
    fix = (
        f"serve it on {better.shape.name} ({better.shape.hosts} host(s): --set "
        f"vllm.tpu.type={better.shape.name})"
        if better
        else f"no {shape.generation.name} slice holds it: quantize (--dtype int8), shorten "
        "--max-model-len, or use a generation with more HBM per chip"
    )
    if better and result.heads_divide:
        fix += ", or quantize (--dtype int8) or shorten --max-model-len"
    raise UsageError(field=f"{model.name} on {shape.name}", problem=problem, fix=fix)
