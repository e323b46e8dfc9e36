"""MaxText's sentencepiece and tiktoken tokenizers for a workstation without MaxText (the data
extra: `data prepare` on macOS counts tokens with these). They do what MaxText 0.2.5's
SentencePieceTokenizer and TikTokenTokenizer do (maxtext/input_pipeline/tokenizer.py): the same
library calls, the same special tokens and ids, BOS and EOS added the same way.
tests/unit/test_maxtext_tokenizers.py holds their ids to MaxText's own on the same files; where
MaxText is installed, launcher.core.data.tokenizers uses MaxText's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

# TikTokenTokenizer's: Llama 3's split pattern and its 256 special tokens after the ranks.
TIKTOKEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
TIKTOKEN_RESERVED_SPECIAL = 256
TIKTOKEN_SPECIAL = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|reserved_special_token_2|>",
    "<|reserved_special_token_3|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|reserved_special_token_4|>",
    "<|eot_id|>",
] + [f"<|reserved_special_token_{i}|>" for i in range(5, TIKTOKEN_RESERVED_SPECIAL - 5)]
# tiktoken panics past about 400k characters, and on very long runs of (non-)whitespace
# (openai/tiktoken#195): MaxText encodes such text in pieces of these sizes.
TIKTOKEN_MAX_ENCODE_CHARS = 400_000
TIKTOKEN_MAX_RUN = 25_000


class SentencePieceTokenizer:
    def __init__(self, path: str, add_bos: bool, add_eos: bool) -> None:
        from sentencepiece import SentencePieceProcessor

        self._tokenizer_model = SentencePieceProcessor()
        try:
            self._tokenizer_model.Load(path)
        except Exception as e:  # as MaxText's: sentencepiece raises OSError and RuntimeError
            raise ValueError(f"Failed to load sentencepiece tokenizer from {path}: {e}") from e
        self.bos_id = self._tokenizer_model.bos_id()
        self.eos_id = self._tokenizer_model.eos_id()
        self.add_bos, self.add_eos = add_bos, add_eos

    def encode(self, s: str) -> list[int]:
        ids = list(self._tokenizer_model.EncodeAsIds(s))
        return [self.bos_id] * self.add_bos + ids + [self.eos_id] * self.add_eos


class TikTokenTokenizer:
    def __init__(self, path: str, add_bos: bool, add_eos: bool) -> None:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        try:
            ranks = load_tiktoken_bpe(path)
        except Exception as e:  # as MaxText's: a bad file raises many kinds
            raise ValueError(f"Failed to load tiktoken tokenizer from {path}: {e}") from e
        special = {token: len(ranks) + i for i, token in enumerate(TIKTOKEN_SPECIAL)}
        self.model = tiktoken.Encoding(
            name=Path(path).name,
            pat_str=TIKTOKEN_PATTERN,
            mergeable_ranks=ranks,
            special_tokens=special,
        )
        self.n_words: int = self.model.n_vocab
        self.bos_id, self.eos_id = special["<|begin_of_text|>"], special["<|end_of_text|>"]
        self.add_bos, self.add_eos = add_bos, add_eos

    def encode(self, s: str) -> list[int]:
        ids: list[int] = []
        for start in range(0, len(s), TIKTOKEN_MAX_ENCODE_CHARS):
            for piece in _runs_at_most(s[start : start + TIKTOKEN_MAX_ENCODE_CHARS]):
                # Special tokens' text is encoded as text (MaxText's disallowed_special=()).
                ids.extend(self.model.encode(piece, allowed_special=set(), disallowed_special=()))
        return [self.bos_id] * self.add_bos + ids + [self.eos_id] * self.add_eos


def _runs_at_most(s: str, longest: int = TIKTOKEN_MAX_RUN) -> Iterator[str]:
    """`s` cut so that no piece holds more than `longest` whitespace or non-whitespace
    characters in a row (MaxText's _split_whitespaces_or_nonwhitespaces)."""
    run, in_space, start = 0, s[:1].isspace(), 0
    for i, ch in enumerate(s):
        if in_space ^ ch.isspace():
            run, in_space = 1, ch.isspace()
        else:
            run += 1
            if run > longest:
                yield s[start:i]
                start, run = i, 1
    yield s[start:]
