"""`python -m launcher.runtime decode`: generate text from a run's checkpoint, on the slice,
with MaxText's own inference engine. It is the job `tpu-launcher generate` submits.

The model is the one the run trained (its config and overrides, kept in the run's directory
by `train`), its parameters the latest committed checkpoint (or --step). The engine runs on
every host of the slice through the same JaxTrainer as training; the driver tokenizes the
prompt, and decodes and prints what rank 0 generated.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

from launcher.core.errors import UsageError
from launcher.core.job.events import format_result, format_summary_title
from launcher.core.job.plan import (
    JobOptions,
    plan_job,
)
from launcher.core.job.run_dir import output_dir
from launcher.core.job.run_record import RunCheckpoint, find_run_checkpoint
from launcher.core.job.run_requests import GenerateRequest, check_request
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.maxtext.model_shape import model_values
from launcher.runtime.models.families import MOE_BIAS_VAR_MODELS
from launcher.runtime.models.prompt_tokens import Tokenizer, tokenizer_for, until_eos, user_turn_ids

# The prompt is padded to a multiple of this: prompts of similar length share one compiled
# prefill (in the run's compilation cache).
PREFILL_BUCKET = 16
# MaxText's blocks with sliding-window layers (models/gemma2.py, gemma3.py, gemma4.py,
# gpt_oss.py: their attention patterns).
SLIDING_WINDOW_BLOCKS = ("gemma2", "gemma3", "gemma4", "gpt_oss")


@dataclass(frozen=True)
class GenerationPlan:
    found: RunCheckpoint  # the run's checkpoint, or the import, it generates from
    args: MaxTextArgs  # the run's model, pointed at the checkpoint, sized for the prompt
    tokenizer: Tokenizer
    prompt_ids: list[int]


def plan_generation(request: GenerateRequest, output_dir: str) -> GenerationPlan:
    """Finds the run and its checkpoint and builds the decode arguments. Raises UsageError."""
    check_request(request)
    found = find_run_checkpoint(
        request.run, request.step, request.maxtext_argv, output_dir, imports=True
    )
    model = found.model
    tokenizer = tokenizer_for(model)
    if request.chat:
        prompt_ids = user_turn_ids(tokenizer, request.prompt)
    else:
        prompt_ids = tokenizer.encode(request.prompt)
    prefill = -(-len(prompt_ids) // PREFILL_BUCKET) * PREFILL_BUCKET
    forced = {
        "load_parameters_path": str(found.items_dir),
        "enable_checkpointing": "false",
        "max_prefill_predict_length": str(prefill),
        "max_target_length": str(prefill + request.max_tokens),
        "decode_sampling_strategy": "greedy" if request.temperature == 0 else "weighted",
        "decode_sampling_temperature": str(request.temperature or 1.0),
    }
    args = MaxTextArgs(model.config, {**model.overrides, **forced})
    model_keys = model_values(args)  # as MaxText will set them: the model file read once
    check_window(model_keys, int(args.get("max_target_length")), prefill)
    check_loadable(model_keys)
    return GenerationPlan(found, args, tokenizer, prompt_ids)


def check_loadable(model_keys: dict[str, Any]) -> None:
    """MaxText's inference engine loads parameters through from_pretrained, which frees every
    weight and restores only nnx.Param (utils/model_creation_utils.py): a model whose routing
    bias is a MoEBiasVar fails at its first step ("Array has been deleted"; measured on a tiny
    DeepSeek V3 import). Training's loader restores it."""
    name = str(model_keys.get("model_name") or "")
    if name.startswith(MOE_BIAS_VAR_MODELS):
        raise UsageError(
            "--run",
            f"MaxText's inference engine cannot load a {name} model: its loader frees the "
            "routing bias (a MoEBiasVar) and restores only parameters",
            "export the run (tpu-launcher export) and serve it with vLLM",
        )


def check_window(model_keys: dict[str, Any], length: int, prefill: int) -> None:
    """MaxText's inference engine places a decoded token at the end of each KV cache's slots,
    not at its position (layers/attention_op.py, generate_attention_mask: next_pos =
    kv_seq_len - 1 in autoregressive mode), so a sliding-window layer attends to the wrong
    tokens once the caches are longer than the window: measured on tiny Gemma 3 and gpt-oss
    models, greedy tokens then leave transformers' after the first. Within the window it
    computes the model."""
    window = int(model_keys.get("sliding_window_size") or 0)
    if str(model_keys.get("decoder_block")) not in SLIDING_WINDOW_BLOCKS or not 0 < window < length:
        return
    room = window - prefill
    raise UsageError(
        "--max-tokens",
        f"the prompt (padded to {prefill} tokens) and the new tokens need {length} positions, "
        f"past this model's {window}-token sliding window, and MaxText's inference engine "
        "masks a window by its cache's slots, not the token's position: past it, it computes "
        "a different model",
        (f"ask for at most {room} new tokens" if room > 0 else "shorten the prompt")
        + f" (within {window} positions), or export the run and serve it with vLLM",
    )


def generate(request: GenerateRequest) -> int:
    from launcher.runtime.job.driver import ReportFailures
    from launcher.runtime.job.kv import read_summary
    from launcher.runtime.models.generate_worker import generate_per_worker
    from launcher.runtime.train.entrypoint import ray_nodes, slice_trainer

    plan = plan_generation(request, output_dir())
    job = plan_job(
        JobOptions(), plan.args.argv()[1:], nodes=ray_nodes(JobOptions()), require_slice=True
    )
    assert job.slices is not None
    print(
        f"launcher: generate from {plan.found.describe()}",
        flush=True,
    )
    print(
        f"launcher: {job.slices.describe()}: {job.slices.num_workers} workers x "
        f"{job.slices.devices_per_host} devices, MaxText's inference engine",
        flush=True,
    )
    sampling = "greedy" if request.temperature == 0 else f"temperature {request.temperature}"
    print(
        f"launcher: prompt of {len(plan.prompt_ids)} tokens ({plan.tokenizer.name}); "
        f"{request.max_tokens} new tokens, {sampling}, seed {request.seed}",
        flush=True,
    )
    summary_key = f"generate/{request.run}/{uuid.uuid4().hex}"
    trainer = slice_trainer(
        job,
        generate_per_worker,
        {
            "argv": job.args.argv("decode"),
            "prompt_ids": plan.prompt_ids,
            "max_tokens": request.max_tokens,
            "seed": request.seed,
            "summary_key": summary_key,
        },
        name=f"{request.run}-generate",
        policy=ReportFailures(),
    )
    started = time.monotonic()
    try:
        trainer.fit()
    except Exception as e:  # Ray wraps worker failures; show the cause, not Ray's internals
        print(f"\nlauncher: generation failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    _print_result(request, plan, read_summary(summary_key), time.monotonic() - started)
    return 0


def _print_result(request: GenerateRequest, plan: GenerationPlan, out: dict, seconds: float):
    ids = until_eos(list(out["token_ids"]), plan.tokenizer.eos_id)
    text = plan.tokenizer.decode(ids)
    quoted = json.dumps  # control characters escaped: a tiny model emits any byte
    print("\n" + format_summary_title("generate"), flush=True)
    found = plan.found
    where = f"{found.run}, checkpoint step {found.step}"
    where = f"import {found.run}" if found.imported else where
    print(f"run:        {where}")
    turn = " (a user's turn, by the chat template)" if request.chat else ""
    print(f"prompt:     {quoted(request.prompt, ensure_ascii=False)}{turn}")
    print(f"generated:  {quoted(text, ensure_ascii=False)}")
    print(f"token ids:  {' '.join(map(str, ids))}")
    per_token = out["generate_seconds"] / max(1, len(ids) - 1)
    print(
        f"time:       {seconds:.0f}s on the slice: parameters loaded in {out['load_seconds']}s, "
        f"prefill {out['prefill_seconds']}s (compile included), {len(ids) - 1} more tokens "
        f"in {out['generate_seconds']}s ({per_token * 1000:.0f} ms/token)"
    )
    print(
        format_result(
            {
                "run": request.run,
                "step": plan.found.step,
                "prompt_ids": plan.prompt_ids,
                "token_ids": ids,
                "text": text,
                "seed": request.seed,
                **{k: v for k, v in out.items() if k.endswith("_seconds")},
            }
        ),
        flush=True,
    )
