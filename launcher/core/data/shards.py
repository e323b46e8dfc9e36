"""How `data prepare` lays a corpus out, whoever runs it (one process on a workstation, or Ray
Data on a cluster's hosts): which split a document is in, how many shards a split has and which
shard a document is in, what a shard's record of itself holds, the resumable state, and the
manifest. Both paths apply these same rules, so the same input gives byte-identical shards and
the same manifest checksum on either.

The rules: documents in source order (files sorted by path, then their order in the file); an
empty one dropped, then an exact duplicate of an earlier one, then (when asked) a near duplicate
(launcher.core.data.near_duplicates); the split by a hash of the text; a split's shards from its
size; its documents cut into that many contiguous, near-equal runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from launcher.core.data.byte_tokenizer import BYTES, byte_tokenizer_files
from launcher.core.data.datasets import SPLITS, TEXT_FEATURE, Manifest, SplitStats, length_histogram
from launcher.core.data.example_records import example_bytes
from launcher.core.data.tokenizers import (
    infer_tokenizer_type,
    load_tokenizer,
    resolve_tokenizer_path,
)
from launcher.core.errors import UsageError

STATE = ".prepare-state.json"
DEFAULT_SHARD_MB = 64  # per shard, before tokenizing: many hosts read many shards at once


@dataclass(frozen=True)
class PrepareRequest:
    source: str | Path  # a file, a directory, or gs://BUCKET/prefix (on the cluster's path)
    name: str
    output_dir: str | Path  # the bucket: the dataset goes in output_dir/datasets/name
    tokenizer: str = BYTES
    tokenizer_type: str | None = None
    eval_fraction: float = 0.05
    split_seed: int = 0
    fields: tuple[str, ...] = (TEXT_FEATURE,)  # one: a corpus; several: an instruction set
    shard_mb: float = DEFAULT_SHARD_MB
    overwrite: bool = False
    progress: bool = True
    near_duplicates: float | None = None  # MinHash's Jaccard threshold; None: exact only

    @property
    def features(self) -> tuple[str, ...]:
        """The Example features written: `text` for a corpus (what MaxText's pretraining reads),
        the fields' own names for an instruction set (what its SFT pipeline matches)."""
        return (TEXT_FEATURE,) if len(self.fields) == 1 else self.fields

    def to_json(self) -> str:
        """The request as the cluster's job receives it (one argument, never a shell's)."""
        raw = asdict(self)
        raw.update(source=str(self.source), output_dir=str(self.output_dir))
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PrepareRequest:
        raw = json.loads(text)
        return cls(**{**raw, "fields": tuple(raw["fields"])})


@dataclass(frozen=True)
class Settings:
    """What makes two runs of prepare the same dataset (the state file and the manifest)."""

    source_sha256: str
    tokenizer: str
    tokenizer_type: str
    eval_fraction: float
    split_seed: int
    fields: list[str]
    shards: dict[str, int]  # split -> shard count
    near_duplicates: float | None = None

    @classmethod
    def of(
        cls, request: PrepareRequest, digest: str, kind: str, shards: dict[str, int]
    ) -> Settings:
        return cls(
            digest,
            request.tokenizer,
            kind,
            request.eval_fraction,
            request.split_seed,
            list(request.fields),
            shards,
            request.near_duplicates,
        )


def split_of(text: str, seed: int, eval_fraction: float) -> str:
    """The same split for the same text on every run and every machine."""
    h = hashlib.sha256(f"{seed}\0{text}".encode()).digest()
    return "eval" if int.from_bytes(h[:8], "big") / 2**64 < eval_fraction else "train"


def document_text(doc: tuple[str, ...]) -> str:
    """What is hashed for the split and the duplicates: a corpus's document is its one text."""
    return "\0".join(doc)


def document_key(doc: tuple[str, ...]) -> bytes:
    return hashlib.sha256(document_text(doc).encode()).digest()


def document_size(doc: tuple[str, ...]) -> int:
    return sum(len(text.encode()) for text in doc)


def is_empty(doc: tuple[str, ...]) -> bool:
    return not all(text.strip() for text in doc)


def shard_count(split_bytes: int, documents: int, shard_mb: float) -> int:
    """A split's shards: one per `shard_mb` of its text, at least one when it has documents."""
    return max(1, -(-split_bytes // int(shard_mb * 2**20))) if documents else 0


def shard_of(rank: int, documents: int, count: int) -> int:
    """The shard of a split's `rank`-th document: shard k holds ranks [k*n//count,
    (k+1)*n//count), the runs a slice of the split's list gives."""
    return ((rank + 1) * count - 1) // documents


def write_shard(path: Path, docs: list[tuple[str, ...]], features: tuple[str, ...]) -> None:
    """Whole or not at all: written beside its name, then renamed."""
    from array_record.python.array_record_module import ArrayRecordWriter

    partial = path.with_name(path.name + ".partial")
    writer = ArrayRecordWriter(str(partial), "group_size:1")
    for doc in docs:
        writer.write(example_bytes(doc, features))
    writer.close()
    os.replace(partial, path)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def make_shard(
    path: Path, docs: list[tuple[str, ...]], features: tuple[str, ...], tokenizer: Any
) -> dict[str, Any]:
    """Writes a shard and returns its record in the state: examples, tokens, the longest, the
    lengths' histogram and the file's sha256."""
    lengths = [sum(len(tokenizer.encode(t)) for t in doc) for doc in docs]
    write_shard(path, docs, features)
    return {
        "examples": len(docs),
        "tokens": sum(lengths),
        "longest": max(lengths, default=0),
        "lengths": length_histogram(lengths),
        "sha256": file_sha256(path),
    }


def fresh_state(settings: Settings) -> dict[str, Any]:
    return {"settings": asdict(settings), "shards": {}}


def resumed_state(text: str | None, settings: Settings) -> dict[str, Any]:
    """The finished shards of an earlier run with the same settings (the state file's text);
    else a fresh state."""
    fresh = fresh_state(settings)
    try:
        state = json.loads(text) if text else None
    except ValueError:
        return fresh
    if not isinstance(state, dict) or state.get("settings") != fresh["settings"]:
        return fresh
    return state


def checksum_of(shard_sha256s: list[str]) -> str:
    """The manifest's checksum: the shards' sha256s, train then eval, in name order."""
    return hashlib.sha256("".join(shard_sha256s).encode()).hexdigest()


def split_counts(
    state: dict[str, Any], names: list[str]
) -> tuple[int, int, int, dict[str, list[int]]]:
    """A split's examples, tokens, longest and merged lengths from its shards' records."""
    from launcher.core.data.datasets import merge_histograms

    records = [state["shards"][n] for n in names]
    parts = [r.get("lengths") for r in records]
    # Every shard's lengths, or none (a state an older launcher wrote has none).
    histogram = merge_histograms(parts) if all(p is not None for p in parts) else {}
    return (
        sum(r["examples"] for r in records),
        sum(r["tokens"] for r in records),
        max((r["longest"] for r in records), default=0),
        histogram,
    )


def tokenizer_of(request: PrepareRequest) -> tuple[str, str]:
    """The tokenizer's path (a MaxText asset name resolved) and MaxText's tokenizer_type."""
    path = request.tokenizer
    if path != BYTES:
        path = resolve_tokenizer_path(path)
    kind = request.tokenizer_type or (
        "huggingface" if path == BYTES else infer_tokenizer_type(path)
    )
    return path, kind


def refuse_other_dataset(request: PrepareRequest, target: object) -> UsageError:
    return UsageError(
        field="--name",
        problem=f"dataset {request.name!r} at {target} was prepared from another source "
        "or with other settings",
        fix="pick another --name, or --overwrite to replace it (runs that trained on it "
        "keep their checkpoints, not its data)",
    )


def same_settings(existing: Manifest, request: PrepareRequest, digest: str, kind: str) -> bool:
    """Whether a dataset already there was prepared from this source with these settings."""
    return (
        existing.source_sha256 == digest
        and existing.tokenizer == request.tokenizer
        and existing.tokenizer_type == kind
        and existing.eval_fraction == request.eval_fraction
        and existing.split_seed == request.split_seed
        and existing.fields == list(request.features)
        and existing.near_duplicate_threshold == request.near_duplicates
    )


def manifest_of(
    request: PrepareRequest,
    settings: Settings,
    state: dict[str, Any],
    names: dict[str, list[str]],
    tokenizer_path: str,
    vocab_size: int,
    dropped: tuple[int, int, int],
) -> Manifest:
    """The manifest of finished shards (`names` by split, their records in `state`);
    `dropped`: exact duplicates, empty documents, near duplicates."""
    stats = {}
    for split in SPLITS:
        examples, tokens, longest, histogram = split_counts(state, names[split])
        stats[split] = SplitStats(examples, tokens, names[split], longest, histogram)
    return Manifest(
        name=request.name,
        source=str(request.source),
        source_sha256=settings.source_sha256,
        tokenizer=request.tokenizer,
        tokenizer_type=settings.tokenizer_type,
        tokenizer_path=tokenizer_path,
        vocab_size=vocab_size,
        eval_fraction=request.eval_fraction,
        split_seed=request.split_seed,
        train=stats["train"],
        eval=stats["eval"],
        duplicates_dropped=dropped[0],
        empty_dropped=dropped[1],
        checksum=checksum_of([state["shards"][n]["sha256"] for s in SPLITS for n in names[s]]),
        fields=list(request.features),
        near_duplicates_dropped=dropped[2],
        near_duplicate_threshold=request.near_duplicates,
    )


def copy_tokenizer(tokenizer: str, directory: Path) -> Path:
    """The tokenizer goes with the data: the job reads it from the dataset, on every host."""
    directory.mkdir(exist_ok=True)
    if tokenizer == BYTES:
        byte_tokenizer_files(directory)
        return directory
    source = Path(tokenizer)
    if not source.exists():
        load_tokenizer(tokenizer, "sentencepiece", field="--tokenizer")  # raises, with the fix
    if source.is_dir():
        shutil.copytree(source, directory, dirs_exist_ok=True)
        return directory
    shutil.copy2(source, directory / source.name)
    return directory / source.name
