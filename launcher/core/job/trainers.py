"""Which of MaxText's trainers a job runs, named in one place: a job's `--trainer`, the MaxText
keys that select it, and what its data must hold.

MaxText's SFT (maxtext/trainers/post_train/sft/train_sft_native.py) is its pretraining loop,
`train.main`, with use_sft=True: the loop every host of a job runs here, so SFT keeps the job's
checks, progress, goodput, checkpoints, preemption save and restart budget as they are. Its
data pipeline takes an example's prompt and completion apart, renders them with the
tokenizer's chat template and (sft_train_on_completion_only) counts the loss on the completion
only; the fields it accepts are data_processing_utils.validate_and_configure_sft_columns'.
"""

from __future__ import annotations

import json
from pathlib import Path

from launcher.core.errors import UsageError
from launcher.core.maxtext.args import MaxTextArgs

PRETRAIN, SFT, DPO, RL = "pretrain", "sft", "dpo", "rl"
TRAINERS = (PRETRAIN, SFT, DPO, RL)
# An instruction set's fields, as `data prepare --fields` writes them (MaxText also takes a
# `messages` column of role/content lists, which an ArrayRecord text feature does not hold).
SFT_FIELDS = ("prompt,completion", "question,answer")
SFT_KEYS = {
    # train_sft_native.py also sets use_tunix_gradient_accumulation=False: its default.
    "use_sft": "true",
    # The loss on what the model is to say, not on the prompts it is given (TRL's default too).
    "sft_train_on_completion_only": "true",
    # The chat template places the special tokens. MaxText's Grain SFT pipeline renders a turn
    # with the template, then encodes its prompt and its completion apart with add_bos and
    # add_eos (grain_data_processing._tokenize_sft_chunks): left on, a BOS-adding tokenizer
    # trains on `[BOS] prompt [EOS] [BOS] completion [EOS]`, which no chat server sends. Its
    # Hugging Face pipeline turns both off for SFT (hf_data_processing.preprocessing_pipeline).
    "add_bos": "false",
    "add_eos": "false",
}
# MaxText 0.2.5's DPO is Tunix's trainer (train_dpo.py imports tunix.sft.dpo), a loop of its
# own; the loop every host runs here refuses use_dpo (train_utils.validate_train_config).
DPO_BLOCKED = (
    "MaxText's DPO runs in Tunix's trainer (maxtext/trainers/post_train/dpo/train_dpo.py), not "
    "in the train loop this launcher runs on every host, whose progress, goodput, checkpoints "
    "and preemption save it would not have (that loop refuses use_dpo: "
    "maxtext/utils/train_utils.py)"
)


def is_sft(args: MaxTextArgs) -> bool:
    """Whether MaxText runs the job as SFT: --trainer=sft set it, or a run's record carries it."""
    return str(args.get("use_sft")).lower() == "true"


def trainer_keys(trainer: str, args: MaxTextArgs, fields: list[str] | None) -> dict[str, str]:
    """The MaxText keys of `trainer`, checked against the job's arguments and, where the data is
    seen, the fields of its records. Raises UsageError."""
    if trainer not in TRAINERS:
        raise UsageError("trainer", f"{trainer!r} is not a trainer", f"one of {TRAINERS}")
    if trainer == DPO:
        raise UsageError(
            "trainer",
            f"dpo cannot run on this path: {DPO_BLOCKED}",
            "fine-tune with --trainer=sft; for preference tuning, run MaxText's train_dpo.py "
            "(with google-tunix) on the release's slices yourself",
        )
    if trainer == RL:
        raise UsageError(
            "trainer",
            "rl (GRPO) cannot run on this path: MaxText's RL is Tunix's trainer with a "
            "sampler beside it (maxtext/trainers/post_train/rl/train_rl.py), not the train "
            "loop this launcher runs on every host",
            "fine-tune with --trainer=sft here; run MaxText's train_rl.py (with google-tunix "
            "and its sampler) on the release's slices yourself",
        )
    if trainer == PRETRAIN:
        return {}  # or MaxText's own use_sft=true, as a run's record carries it
    if fields is not None and ",".join(fields) not in SFT_FIELDS:
        raise UsageError(
            "--data",
            f"SFT reads an instruction set's {' or '.join(SFT_FIELDS)}; this dataset's records "
            f"hold {','.join(fields)}",
            "prepare the instruction set with `tpu-launcher data prepare SOURCE --name NAME "
            "--fields prompt,completion`",
        )
    return SFT_KEYS


def check_chat_template(args: MaxTextArgs, view: tuple[str, str] | None) -> None:
    """SFT renders each example with the tokenizer's chat template: a tokenizer without one fails
    every host at its first batch, after the start-up; this says it before the job starts,
    where the tokenizer's directory is seen (`view`: the hosts' path, and this process's)."""
    if not is_sft(args) or args.get("chat_template"):
        return
    if str(args.get("tokenizer_type")) != "huggingface":
        raise UsageError(
            "tokenizer_type",
            f"SFT renders examples with a Hugging Face tokenizer's chat template; this job's "
            f"tokenizer is {args.get('tokenizer_type')} ({args.get('tokenizer_path')})",
            "start from an import (--from=NAME: its tokenizer), or name a Hugging Face "
            "tokenizer directory: tokenizer_type=huggingface tokenizer_path=DIR",
        )
    path = str(args.get("tokenizer_path") or "")
    if view and path.startswith(view[0]):
        path = view[1] + path[len(view[0]) :]
    directory = Path(path)
    if not directory.is_dir():
        return  # a hub id, or a bucket this process does not see: MaxText says it there
    config = directory / "tokenizer_config.json"
    template = (directory / "chat_template.jinja").is_file() or (
        config.is_file() and json.loads(config.read_text()).get("chat_template")
    )
    if not template:
        raise UsageError(
            "chat_template",
            f"SFT renders each example with the tokenizer's chat template; the tokenizer at "
            f"{directory} has none (a base model's often has none)",
            "import the instruct model's tokenizer, or give the template after --: "
            "chat_template='{% for m in messages %}...{% endfor %}'",
        )


def describe_trainer(args: MaxTextArgs) -> list[str]:
    """The plan's line about the trainer, where it is not pretraining."""
    if not is_sft(args):
        return []
    completion = str(args.get("sft_train_on_completion_only")).lower() == "true"
    return [
        "trainer: sft (MaxText's train loop with use_sft): each example rendered by the "
        "tokenizer's chat template, the loss on "
        + ("its completion" if completion else "all of it (sft_train_on_completion_only=false)")
    ]
