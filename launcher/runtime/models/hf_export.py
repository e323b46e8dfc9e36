"""`python -m launcher.runtime convert`: a run's committed checkpoint as a Hugging Face model
directory (config.json, model.safetensors, tokenizer, a model card) next to its checkpoints, which
vLLM serves. It is the job `tpu-launcher export` submits.

Only the parameters are read (Orbax restores the `params` subtree of the training state, as
numpy). Names, shapes and layout changes (MaxText folds 1/sqrt(head_dim) into the query kernel
where Hugging Face scales in attention; Llama 3.1's rotary pairs are interleaved in MaxText and
halves in Hugging Face; experts stacked on an axis of their own) are MaxText's own conversion
tables of the model's family (launcher.runtime.models.families), applied here without the torch
its converter needs. The
directory is written beside its final name and renamed last, so a half-written export is never
served.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from launcher.core.data.byte_tokenizer import byte_tokenizer_files
from launcher.core.errors import UsageError
from launcher.core.job.events import format_result, format_summary_title
from launcher.core.job.run_dir import output_dir
from launcher.core.job.run_record import RunCheckpoint, find_run_checkpoint
from launcher.core.job.run_requests import ExportRequest, check_request
from launcher.runtime.models.card import CARD, base_model_config, model_card
from launcher.runtime.models.conversion_host import conversion_bytes, run_where_memory_is
from launcher.runtime.models.families import (
    YARN_KEYS,
    Family,
    conversion_tables,
    family_of_block,
    gemma3_layer_types,
    gemma3_query_scalars,
    gpt_oss_layer_types,
    hf_shapes,
    llama31_rope_scaling,
    stacking_axis,
)
from launcher.runtime.models.prompt_tokens import has_byte_tokens

EXPORT_RECORD = "tpu-launcher-export.json"
WEIGHTS_FILE = "model.safetensors"
# The ropes export writes beyond default, by block: the family's own.
ROPE_TYPES = {"llama2": ("default", "llama3.1"), "gpt_oss": ("yarn",), "deepseek": ("yarn",)}


def _ropes_by_block() -> str:
    return ", ".join(f"{'/'.join(r)} for {b}" for b, r in ROPE_TYPES.items())


@dataclass(frozen=True)
class ModelShape:
    """The model's family and sizes as MaxText derived them (pyconfig), named as Hugging Face
    names them."""

    family: Family
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_type: str
    max_position_embeddings: int
    tie_word_embeddings: bool
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    norm_topk_prob: bool
    config: Any  # MaxText's own (pyconfig): its conversion tables read it too

    @classmethod
    def from_maxtext(cls, c) -> ModelShape:
        family = family_of_block(str(getattr(c.decoder_block, "value", c.decoder_block)))
        rope_type = str(getattr(c.rope_type, "value", c.rope_type))  # pyconfig's enums
        if rope_type not in ROPE_TYPES.get(family.block, ("default",)):
            raise UsageError(
                "rope_type",
                f"export writes rope_type default ({_ropes_by_block()}); this {family.block} "
                f"run's is {rope_type}",
                "use MaxText's own converter (maxtext.checkpoint_conversion.to_huggingface)",
            )
        experts = int(getattr(c, "num_experts", 1) or 1) if family.moe else 0
        return cls(
            family=family,
            vocab_size=int(c.vocab_size),
            hidden_size=int(c.emb_dim),
            intermediate_size=int(c.mlp_dim),
            num_hidden_layers=int(c.num_decoder_layers),
            num_attention_heads=int(c.num_query_heads),
            num_key_value_heads=int(c.num_kv_heads),
            head_dim=int(c.head_dim),
            rms_norm_eps=float(c.normalization_layer_epsilon),
            rope_theta=float(c.rope_max_timescale),
            rope_type=rope_type,
            max_position_embeddings=int(c.max_target_length),
            tie_word_embeddings=bool(c.logits_via_embedding),
            num_experts=experts,
            num_experts_per_tok=int(c.num_experts_per_tok) if experts else 0,
            moe_intermediate_size=int(c.moe_mlp_dim) if experts else 0,
            norm_topk_prob=bool(getattr(c, "norm_topk_prob", False)),
            config=c,
        )

    def hf_config(self, dtype: str, special: dict[str, int | None]) -> dict:
        """config.json of the family's transformers model with these sizes; `special`: the
        tokenizer's bos/eos token ids (None: it has none, and vLLM stops at no token)."""
        import transformers

        rope: dict[str, Any] = {"rope_type": "default", "rope_theta": self.rope_theta}
        if self.rope_type == "llama3.1":  # MaxText's LLaMARotaryEmbedding: Llama 3.1's scaling
            rope = {**llama31_rope_scaling(), "rope_theta": self.rope_theta}
        # As a dict: torch_dtype is one of the keys PretrainedConfig takes through **kwargs.
        fields: dict[str, Any] = {
            "architectures": [self.family.architecture],
            **special,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "rms_norm_eps": self.rms_norm_eps,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "rope_parameters": rope,
            "torch_dtype": dtype,
            **self._family_fields(),
        }
        return getattr(transformers, self.family.config_class)(**fields).to_dict()

    def _family_fields(self) -> dict[str, Any]:
        """What the family's config class needs beyond the sizes for MaxText's computation:
        full attention (MaxText's blocks have no window), every layer a MoE layer."""
        block = self.family.block
        fields: dict[str, Any] = {}
        if block in ("mistral", "qwen3", "qwen3_moe", "mixtral"):
            fields["sliding_window"] = None
        if block in ("qwen3", "qwen3_moe"):
            fields["use_sliding_window"] = False
        if block == "qwen3_moe":
            fields |= {
                "num_experts": self.num_experts, "num_experts_per_tok": self.num_experts_per_tok,
                "moe_intermediate_size": self.moe_intermediate_size, "decoder_sparse_step": 1,
                "mlp_only_layers": [], "norm_topk_prob": self.norm_topk_prob,
            }  # fmt: skip
        if block == "gemma3":
            fields |= _gemma3_fields(self)
        if block == "gpt_oss":
            fields |= _gpt_oss_fields(self)
        if block == "deepseek":
            fields |= _deepseek_fields(self)
        if block == "mixtral":
            fields |= {
                "num_local_experts": self.num_experts,
                "num_experts_per_tok": self.num_experts_per_tok,
                "intermediate_size": self.moe_intermediate_size,
            }
        return fields


def _gemma3_fields(shape: ModelShape) -> dict[str, Any]:
    """Gemma 3's config.json beyond the sizes, from the MaxText keys the block computes."""
    c = shape.config
    full: dict[str, Any] = {"rope_type": "default", "rope_theta": float(c.rope_max_timescale)}
    if float(c.rope_linear_scaling_factor) != 1.0:
        full |= {"rope_type": "linear", "factor": float(c.rope_linear_scaling_factor)}
    scalars = gemma3_query_scalars(shape.hidden_size, shape.num_attention_heads, shape.head_dim)
    return {
        "hidden_activation": "gelu_pytorch_tanh",
        "sliding_window": int(c.sliding_window_size),
        "layer_types": gemma3_layer_types(shape.num_hidden_layers),
        "rope_parameters": {
            "full_attention": full,
            "sliding_attention": {
                "rope_type": "default",
                "rope_theta": float(c.local_rope_max_timescale),
            },
        },
        "query_pre_attn_scalar": scalars[str(c.model_name)],
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
    }


def _gpt_oss_fields(shape: ModelShape) -> dict[str, Any]:
    """gpt-oss's config.json beyond the sizes, from the MaxText keys the block computes."""
    c = shape.config
    return {
        "num_local_experts": shape.num_experts,
        "num_experts_per_tok": shape.num_experts_per_tok,
        "intermediate_size": shape.moe_intermediate_size,
        "attention_bias": True,
        "sliding_window": int(c.sliding_window_size),
        "layer_types": gpt_oss_layer_types(shape.num_hidden_layers),
        "swiglu_limit": float(c.mlp_activations_limit),
        "rope_parameters": _yarn(shape),
    }


def _yarn(shape: ModelShape) -> dict[str, Any]:
    """Hugging Face's YaRN parameters of MaxText's yarn rope keys."""
    c = shape.config
    yarn = {hf: float(getattr(c, mt)) for hf, mt in YARN_KEYS.items()}
    yarn["original_max_position_embeddings"] = int(c.original_max_position_embeddings)
    return {"rope_type": "yarn", "rope_theta": shape.rope_theta, **yarn,
            "truncate": bool(c.rope_truncate)}  # fmt: skip


def _deepseek_fields(shape: ModelShape) -> dict[str, Any]:
    """DeepSeek V3's config.json beyond the sizes, from the MaxText keys the block computes (the
    inverse of model_families.deepseek_keys)."""
    c = shape.config
    rope = _yarn(shape)
    mscale = float(c.mscale)
    if mscale:  # the softmax's; the rotary output scaled too where rope_attention_scaling
        rope |= {
            "mscale_all_dim": mscale,
            **({} if c.rope_attention_scaling else {"mscale": mscale}),
        }
    groups, top_groups = int(c.n_routing_groups), int(c.topk_routing_group)
    return {
        "n_routed_experts": shape.num_experts,
        "num_experts_per_tok": shape.num_experts_per_tok,
        "moe_intermediate_size": shape.moe_intermediate_size,
        "n_shared_experts": int(c.shared_experts),
        "first_k_dense_replace": int(c.first_num_dense_layers),
        "n_group": groups if groups > 0 else 1,
        "topk_group": top_groups if top_groups > 0 else 1,
        "routed_scaling_factor": float(c.routed_scaling_factor),
        "norm_topk_prob": True,
        "q_lora_rank": int(c.q_lora_rank) or None,
        "kv_lora_rank": int(c.kv_lora_rank),
        "qk_nope_head_dim": int(c.qk_nope_head_dim),
        "qk_rope_head_dim": int(c.qk_rope_head_dim),
        "v_head_dim": int(c.v_head_dim),
        "head_dim": int(c.qk_rope_head_dim),
        "num_key_value_heads": shape.num_attention_heads,
        "rope_interleave": bool(c.rope_interleave),
        "rope_parameters": rope,
    }


def restore_params(items_dir: Path) -> dict:
    """The parameters of an Orbax training state ({"params": {"decoder": ...}}, MaxText's
    conversion tables' form), as numpy arrays on this host."""
    import jax
    import orbax.checkpoint as ocp

    items_dir = items_dir.resolve()  # Orbax finds no metadata under a relative path
    checkpointer = ocp.PyTreeCheckpointer()
    tree = checkpointer.metadata(items_dir).item_metadata.tree
    wanted = {"params": tree["params"]}
    as_numpy = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), wanted)
    restored = checkpointer.restore(
        items_dir,
        args=ocp.args.PyTreeRestore(item=wanted, restore_args=as_numpy, partial_restore=True),
    )
    return restored["params"]  # a training state nests them: {"params": {"params": ...}}


def to_hf_tensors(params: dict, shape: ModelShape) -> dict[str, np.ndarray]:
    """MaxText's parameter tree -> Hugging Face tensors, by MaxText's own tables of the family."""
    from maxtext.checkpoint_conversion.utils.tensor_handling import apply_hook_fns

    dims = shape.hf_config("float32", {})
    names, hooks = conversion_tables(shape.family, dims, shape.config, saving_to_hf=True)
    shapes = hf_shapes(shape.family, dims)
    flat = _flatten(params)
    if shape.tie_word_embeddings:  # no logits kernel: lm_head is the embedding
        names = {k: v for k, v in names.items() if "logits_dense" not in k}
    # Qwen's table names the attention biases of Qwen 2.5, which Qwen 3 does not have; the
    # DeepSeek table the tensors of V2's query and V3.2's indexer: a name this model's shapes
    # lack is another model's.
    names = {k: v for k, v in names.items() if all(n in shapes for n in _hf_names(v))}
    missing = sorted(k for key in names for k in _atoms(key) if k not in flat)
    if missing:
        raise UsageError(
            "checkpoint",
            f"the checkpoint has no {', '.join(missing[:3])} (a {shape.family.block} MaxText "
            "model has)",
            "check that the run's config is the one the checkpoint was trained with",
        )
    out: dict[str, np.ndarray] = {}
    for mt_key, hf_names in names.items():
        # A composite key's tensors, sliced alike, go to its hook together (gpt-oss's wi_0 and
        # wi_1, interleaved into gate_up_proj).
        parts = [_split(flat[k], hf_names, shape.config, k) for k in _atoms(mt_key)]
        for sliced in zip(*parts, strict=True):
            hf_name = sliced[0][0]
            tensors = [t for _, t in sliced]
            tensor = tensors if isinstance(mt_key, tuple) else tensors[0]
            tensor = np.asarray(apply_hook_fns(tensor, shapes[hf_name], hooks.get(mt_key)))
            out[hf_name] = np.ascontiguousarray(tensor)
            if list(out[hf_name].shape) != list(shapes[hf_name]):
                raise AssertionError(f"{hf_name}: {out[hf_name].shape} != {shapes[hf_name]}")
    return out


def _atoms(key: str | tuple[str, ...]) -> tuple[str, ...]:
    """A table's MaxText key as its keys: one, or a composite key's several."""
    return key if isinstance(key, tuple) else (key,)


def _hf_names(names: Any) -> list[str]:
    """A table's Hugging Face name(s), nested lists flattened."""
    return [n for sub in names for n in _hf_names(sub)] if isinstance(names, list) else [names]


def _split(value: np.ndarray, hf_names: Any, config, mt_key: str):
    """(Hugging Face name, its slice of `value`): the inverse of the import's stacking, on the
    axes MaxText's converter (to_huggingface) slices."""
    from maxtext.checkpoint_conversion.utils.tensor_handling import nesting_depth, stacked_axes

    depth = nesting_depth(hf_names)
    if depth == 0:
        yield hf_names, value
        return
    if depth == 1:
        axes: tuple[int, ...] = (stacking_axis(mt_key, config, value.ndim),)
    else:
        axes = tuple(stacked_axes(mt_key, config, depth))
    leading = np.moveaxis(value, axes, tuple(range(depth)))

    def walk(tensor: np.ndarray, names: Any, level: int):
        if level == depth:
            yield names, tensor
            return
        for i, sub in enumerate(names):
            yield from walk(tensor[i], sub, level + 1)

    yield from walk(leading, hf_names, 0)


def _flatten(tree: dict, prefix: str = "") -> dict[str, np.ndarray]:
    """{'params': {'decoder': {...}}} -> {'params-decoder-...': array}: MaxText's key form."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}-{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(_flatten(value, name))
        else:
            flat[name] = value
    return flat


def tokenizer_files(args, directory: Path) -> tuple[str, dict[str, int | None]]:
    """Writes the model's tokenizer into `directory`; says which, and its bos/eos ids."""
    if has_byte_tokens(args):
        byte_tokenizer_files(directory)
        return "UTF-8 bytes (tokenizer.json)", {"bos_token_id": None, "eos_token_id": None}
    path, kind = str(args.get("tokenizer_path") or ""), str(args.get("tokenizer_type"))
    if kind == "huggingface":
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, token=args.get("hf_access_token"))
        tokenizer.save_pretrained(directory)
        special = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
        return f"Hugging Face {path}", special
    raise UsageError(
        "tokenizer_type",
        f"export copies Hugging Face tokenizers; this run's is {kind} ({path})",
        "train with the model's Hugging Face tokenizer (tokenizer_type=huggingface "
        "tokenizer_path=<hub id or directory>), or give vLLM --tokenizer=<that> in "
        "vllm.extraArgs",
    )


def export(request: ExportRequest, on_this_host: bool = False) -> int:
    """The export, written by a task on a host with the memory (on_this_host: in this process,
    where no Ray cluster is)."""
    check_request(request)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # reading and reshaping arrays: no device
    found = find_run_checkpoint(
        request.run,
        request.step,
        request.maxtext_argv,
        output_dir(),
    )
    target = found.run_dir.export(found.step)
    print(
        f"launcher: export run {found.run}, checkpoint step {found.step} "
        f"({found.items_dir.parent}) to {target}",
        flush=True,
    )
    if (target / EXPORT_RECORD).is_file():
        print(f"launcher: {target} exists (exported before); kept", flush=True)
        _print_result(found, target, json.loads((target / EXPORT_RECORD).read_text()))
        return 0
    started = time.monotonic()
    staging = target.parent / f".{found.step}.tmp-{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    try:
        if on_this_host:
            record = write_export(found, staging)
        else:
            weights = params_bytes(found.items_dir)
            what = f"exporting {weights / (1 << 30):.1f} GiB of parameters"
            need = conversion_bytes(weights)
            record = run_where_memory_is(write_export, (found, staging), need, what, "--run")
        record["seconds"] = round(time.monotonic() - started, 1)
        (staging / EXPORT_RECORD).write_text(json.dumps(record, indent=1) + "\n")
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _print_result(found, target, record)
    return 0


def params_bytes(items_dir: Path) -> int:
    """The parameters' bytes in a training checkpoint, from Orbax's metadata (no array read)."""
    import jax
    import orbax.checkpoint as ocp

    tree = ocp.PyTreeCheckpointer().metadata(items_dir.resolve()).item_metadata.tree
    leaves = jax.tree.leaves(tree["params"])
    return sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in leaves)


def write_export(found: RunCheckpoint, staging: Path) -> dict[str, Any]:
    """The Hugging Face directory of `found` in `staging`; its record. The arrays are read and
    written on this host, in this one process."""
    from maxtext.configs import pyconfig
    from safetensors.numpy import save_file

    model = found.model.with_defaults(hardware="cpu", skip_jax_distributed_system=True)
    shape = ModelShape.from_maxtext(pyconfig.initialize(model.argv("export")))
    tensors = to_hf_tensors(restore_params(found.items_dir), shape)
    dtype = str(next(iter(tensors.values())).dtype)
    save_file(tensors, str(staging / WEIGHTS_FILE), metadata={"format": "pt"})
    (staging / WEIGHTS_FILE).chmod(0o644)  # safetensors writes 0600; a server reads it
    tokenizer, special = tokenizer_files(found.model, staging)
    # The context the model was made for, not the length this run trained at (128 for a
    # model imported with 131072: vLLM sizes its context from it); a model begun here has only
    # the length it trained at.
    base = base_model_config(found.model) or {}
    positions = int(base.get("max_position_embeddings") or shape.max_position_embeddings)
    shape = dataclasses.replace(shape, max_position_embeddings=positions)
    hf_config = shape.hf_config(dtype, special)
    (staging / "config.json").write_text(json.dumps(hf_config, indent=1))
    card = model_card(found.run, found.step, str(found.items_dir.parent), found.model)
    (staging / CARD).write_text(card)
    return {
        "run": found.run,
        "step": found.step,
        "source": str(found.items_dir.parent),
        "model": str(found.model.config),
        "architecture": shape.family.architecture,
        "tokenizer": tokenizer,
        "dtype": dtype,
        "parameters": int(sum(t.size for t in tensors.values())),
        "max_position_embeddings": positions,
    }


def _print_result(found: RunCheckpoint, target: Path, record: dict) -> None:
    files = sorted(p for p in target.iterdir() if p.is_file())
    print("\n" + format_summary_title("export"), flush=True)
    print(f"run:        {found.run}, checkpoint step {record['step']} ({record['source']})")
    arch = record.get("architecture", "LlamaForCausalLM")  # exports before it was recorded
    print(f"model:      {target} (Hugging Face {arch}, {record['dtype']})")
    print(f"parameters: {record['parameters']:,}; tokenizer: {record['tokenizer']}")
    print("files:      " + ", ".join(f"{p.name} ({p.stat().st_size:,} B)" for p in files))
    # The same path in a serving pod: the chart mounts the bucket at global.gcsfuse.mountPath in
    # every pod of a release (one helper), the path this job's output directory is.
    print(f"serve it:   helm upgrade ... --set serving.engine=vllm --set vllm.model={target}")
    print(format_result({**record, "dir": str(target)}), flush=True)
