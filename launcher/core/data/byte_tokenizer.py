"""The tokenizer of a model whose tokens are UTF-8 bytes (vocabulary 256: the demo's tiny-llama),
as Hugging Face tokenizer files: what `export` puts beside the model for vLLM and what `data
prepare --tokenizer bytes` gives MaxText's Grain pipeline (tokenizer_type=huggingface)."""

from __future__ import annotations

import json
from pathlib import Path

BYTES = "bytes"  # the name `data prepare --tokenizer` knows it by
# Its chat format, for SFT on the local road and chat requests to an export: a turn a line.
CHAT_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'assistant' %}Assistant: {{ m['content'] }}\n"
    "{% else %}User: {{ m['content'] }}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}Assistant: {% endif %}"
)


def byte_tokenizer_files(directory: Path) -> None:
    """A tokenizer whose ids are UTF-8 bytes (the demo model's), in the Hugging Face format vLLM
    and transformers load: byte-level BPE with the 256 byte symbols and no merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = ByteLevel.alphabet()  # the 256 printable stand-ins of bytes, GPT-2's mapping
    by_byte = {ch: _byte_of(ch) for ch in alphabet}
    tokenizer = Tokenizer(models.BPE(vocab=by_byte, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "model_max_length": 1 << 20,
                "chat_template": CHAT_TEMPLATE,
            }
        )
    )


def _byte_of(symbol: str) -> int:
    """GPT-2's bytes_to_unicode, inverted: printable bytes stand for themselves, the others
    were moved to 256 and up in order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    if ord(symbol) in printable:
        return ord(symbol)
    others = [b for b in range(256) if b not in printable]
    return others[ord(symbol) - 256]
