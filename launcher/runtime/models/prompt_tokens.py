"""Text to token ids and back, for the model a run trained.

A model with a vocabulary of at most 256 (the demo's tiny-llama, trained on synthetic data) has
no tokenizer file: its tokens are UTF-8 bytes. Any other model uses MaxText's own tokenizer from
the run's `tokenizer_path` / `tokenizer_type`, the one its data pipeline used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from launcher.core.errors import UsageError
from launcher.core.maxtext.args import MaxTextArgs

BYTE_VOCAB = 256


class Tokenizer(Protocol):
    name: str
    eos_id: int | None

    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...


@dataclass
class ByteTokenizer:
    name: str = "UTF-8 bytes"
    eos_id: int | None = None

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def decode(self, ids: list[int]) -> str:
        # A tiny model's bytes are rarely valid UTF-8: show what is, mark what is not.
        return bytes(i for i in ids if 0 <= i < BYTE_VOCAB).decode(errors="replace")


@dataclass
class MaxTextTokenizer:
    name: str
    eos_id: int | None
    _impl: object

    def encode(self, text: str) -> list[int]:
        return list(self._impl.encode(text))  # type: ignore[attr-defined]

    def decode(self, ids: list[int]) -> str:
        return str(self._impl.decode(ids))  # type: ignore[attr-defined]


def has_byte_tokens(args: MaxTextArgs) -> bool:
    """A model without a tokenizer file whose vocabulary fits the 256 byte values."""
    return int(args.get("vocab_size")) <= BYTE_VOCAB and not args.get("tokenizer_path")


def tokenizer_for(args: MaxTextArgs) -> Tokenizer:
    """The tokenizer of the model `args` describe. Raises UsageError."""
    if has_byte_tokens(args):
        return ByteTokenizer()
    vocab = int(args.get("vocab_size"))
    path = str(args.get("tokenizer_path") or "")
    if not path:
        raise UsageError(
            "tokenizer_path",
            f"the model has a vocabulary of {vocab} and its config names no tokenizer",
            "add tokenizer_path=<file or Hugging Face id> (and tokenizer_type=) after --",
        )
    from maxtext.input_pipeline.tokenizer import build_tokenizer

    kind = str(args.get("tokenizer_type"))
    # BOS as the model was trained (add_bos); no EOS: the prompt is a prefix, not a document.
    add_bos = bool(args.get("add_bos"))
    impl = build_tokenizer(path, kind, add_bos, False, args.get("hf_access_token"))
    eos = getattr(impl, "eos_id", None)
    return MaxTextTokenizer(f"{kind} {path}", eos if isinstance(eos, int) else None, impl)


def until_eos(ids: list[int], eos_id: int | None) -> list[int]:
    """The generated ids up to and including the first end-of-sequence token."""
    if eos_id is not None and eos_id in ids:
        return ids[: ids.index(eos_id) + 1]
    return ids


def user_turn_ids(tokenizer: Tokenizer, prompt: str) -> list[int]:
    """`prompt` as a user's turn and the assistant's cue, in ids, by the tokenizer's chat
    template with the special tokens where the template puts them and nowhere else: the ids an
    SFT run trained its prompts as (trainers.SFT_KEYS) and a chat server sends (transformers'
    apply_chat_template, vLLM's chat API). Raises UsageError."""
    impl = getattr(getattr(tokenizer, "_impl", None), "tokenizer", None)  # transformers'
    if impl is None or not getattr(impl, "chat_template", None):
        raise UsageError(
            "--chat",
            f"the run's tokenizer ({tokenizer.name}) has no chat template",
            "drop --chat and give the prompt as the model was trained to read it, or "
            "fine-tune from an import whose tokenizer has one (--trainer=sft --from=NAME)",
        )
    messages = [{"role": "user", "content": prompt}]
    ids = impl.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, return_dict=False
    )
    return [int(i) for i in ids]
