"""Tokenizer files of the two kinds only MaxText's code read (a sentencepiece model, a tiktoken
BPE file), made here from the project's corpus: nothing downloaded."""

from __future__ import annotations

import base64
from collections import Counter
from pathlib import Path

from launcher.corpus.generate import documents


def sentencepiece_model(where: Path, vocab_size: int = 400) -> Path:
    """A BPE sentencepiece model trained on the corpus."""
    import sentencepiece

    corpus = where / "sp-corpus.txt"
    corpus.write_text("\n".join(documents()))
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(where / "sp"), vocab_size=vocab_size,
        model_type="bpe", minloglevel=2,
    )  # fmt: skip
    return where / "sp.model"


def tiktoken_file(where: Path, merges: int = 200) -> Path:
    """The 256 bytes, then the corpus's commonest byte pairs as merges, in tiktoken's format
    (a base64 token and its rank a line)."""
    text = "\n".join(documents()).encode()
    pairs = Counter(text[i : i + 2] for i in range(len(text) - 1))
    tokens = [bytes([b]) for b in range(256)] + [p for p, _ in pairs.most_common(merges)]
    path = where / "tok.tiktoken"
    path.write_text(
        "".join(f"{base64.b64encode(t).decode()} {rank}\n" for rank, t in enumerate(tokens))
    )
    return path
