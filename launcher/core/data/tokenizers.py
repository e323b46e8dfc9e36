"""A job's tokenizer, found and loaded as MaxText finds and loads it: `data prepare` counts tokens
with it, and the data checks compare its vocabulary with the model's before any host starts."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from launcher.core.errors import UsageError

# MaxText's tokenizer_type values (maxtext/input_pipeline/tokenizer.py: build_tokenizer).
TOKENIZER_TYPES = ("sentencepiece", "huggingface", "tiktoken")


def maxtext_tokenizer_assets() -> Path | None:
    spec = find_spec("maxtext")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "assets" / "tokenizers"


def resolve_tokenizer_path(path: str) -> str:
    """As MaxText's config does (configs/types.py): a path that does not exist, given as a bare
    name, is looked up in MaxText's tokenizer assets (tokenizer.llama2, tokenizer_llama3.tiktoken).
    """
    if not path or os.path.exists(path) or path.startswith("gs://"):
        return path
    assets = maxtext_tokenizer_assets()
    if assets is not None:
        for candidate in (assets / os.path.basename(path), assets / path):
            if candidate.exists():
                return str(candidate)
    return path


def infer_tokenizer_type(path: str) -> str:
    """A directory is a Hugging Face tokenizer, a .tiktoken file tiktoken, any other file
    sentencepiece (MaxText's own assets follow this)."""
    if os.path.isdir(path):
        return "huggingface"
    return "tiktoken" if "tiktoken" in os.path.basename(path) else "sentencepiece"


@dataclass(frozen=True)
class LoadedTokenizer:
    path: str
    type: str
    vocab_size: int
    impl: Any  # MaxText's tokenizer object: encode(str) -> list[int]

    def encode(self, text: str) -> list[int]:
        return list(self.impl.encode(text))


def load_tokenizer(
    path: str, kind: str, *, add_bos: bool = True, add_eos: bool = True, field: str = "tokenizer"
) -> LoadedTokenizer:
    """MaxText's own tokenizer object for `path`; a UsageError names a missing or unreadable one."""
    resolved = resolve_tokenizer_path(path)
    if kind not in TOKENIZER_TYPES:
        raise UsageError(
            field="tokenizer_type",
            problem=f"{kind!r} is not a tokenizer type MaxText knows",
            fix=f"one of {', '.join(TOKENIZER_TYPES)}",
        )
    if not resolved.startswith("gs://") and not os.path.exists(resolved):
        if maxtext_tokenizer_assets() is None and os.sep not in path:
            from launcher.core.package_version import pip_install

            raise UsageError(
                field=field,
                problem=f"tokenizer {path!r} is no file here, and MaxText's tokenizer assets "
                "(where a bare name such as tokenizer.llama2 is found) come with MaxText, "
                "which is not installed here",
                fix="give the tokenizer file's path (MaxText's assets/tokenizers has them), or "
                f"{pip_install('preflight')} (Linux x86_64) for the assets by name",
            )
        raise UsageError(
            field=field,
            problem=f"tokenizer {path!r} not found (nor among MaxText's tokenizer assets)",
            fix="give an existing file (sentencepiece .model, .tiktoken) or Hugging Face "
            "tokenizer directory, or a name in MaxText's assets/tokenizers such as "
            "tokenizer.llama2",
        )
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch was not found"
    try:
        impl = _build(resolved, kind, add_bos, add_eos, field)
    except (ValueError, OSError, AssertionError) as e:
        raise UsageError(
            field=field,
            problem=f"MaxText cannot load {resolved} as a {kind} tokenizer ({e})",
            fix="check the file, or name its type (--tokenizer-type / tokenizer_type=)",
        ) from None
    return LoadedTokenizer(resolved, kind, vocabulary_size(impl), impl)


class _HuggingFaceTokenizer:
    """What MaxText's HFTokenizer does to count (maxtext/input_pipeline/tokenizer.py: transformers'
    AutoTokenizer with its add_bos_token and add_eos_token), where MaxText is not installed: a
    workstation with only the client's data extra."""

    def __init__(self, path: str, add_bos: bool, add_eos: bool) -> None:
        import transformers

        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                path, add_bos_token=add_bos, add_eos_token=add_eos
            )
        except Exception as e:  # as MaxText's: transformers raises many kinds
            raise ValueError(f"Failed to load Hugging Face tokenizer from {path}: {e}") from e

    def encode(self, s: str) -> list[int]:
        return list(self.tokenizer.encode(s))


def _build(path: str, kind: str, add_bos: bool, add_eos: bool, field: str) -> Any:
    """MaxText's own tokenizer where MaxText is installed; without it (the data extra), the
    same tokenizer counted as MaxText counts it."""
    if find_spec("maxtext") is not None:
        from maxtext.input_pipeline.tokenizer import build_tokenizer

        return build_tokenizer(path, kind, add_bos, add_eos, None)
    if kind == "huggingface":
        return _HuggingFaceTokenizer(path, add_bos, add_eos)
    if path.startswith("gs://"):
        raise UsageError(
            field=field,
            problem=f"a {kind} tokenizer in the bucket ({path}) is read with MaxText's "
            "bucket code, and MaxText is not installed here",
            fix="copy the file here (gcloud storage cp) and give its path",
        )
    from launcher.core.data import maxtext_tokenizers

    if kind == "tiktoken":
        return maxtext_tokenizers.TikTokenTokenizer(path, add_bos, add_eos)
    return maxtext_tokenizers.SentencePieceTokenizer(path, add_bos, add_eos)


def vocabulary_size(impl: Any) -> int:
    """Ids the tokenizer can produce: the model's vocab_size must be at least this."""
    if hasattr(impl, "n_words"):  # tiktoken
        return int(impl.n_words)
    if hasattr(impl, "tokenizer"):  # Hugging Face
        return len(impl.tokenizer)
    return int(impl._tokenizer_model.get_piece_size())  # sentencepiece
