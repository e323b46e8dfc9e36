"""`tpu-launcher data prepare`: a team's text, JSONL or Parquet turned into what MaxText's Grain
pipeline reads (ArrayRecord shards of `tf.train.Example` with a `text` feature, or an instruction
set's fields for SFT, a train and an eval split) in the bucket's `datasets/<name>/`, with a
manifest written last.

Resumable and idempotent: each shard is written under a temporary name and renamed when whole,
and `.prepare-state.json` records the finished ones, so a run cut short starts again at the first
unfinished shard; a dataset whose manifest matches the source and the settings is skipped. The
split is by a hash of each document's text (a document is in the same split on every run), and
exact duplicates are dropped (counted in the manifest).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from launcher.client.data.sources import documents, field_option, input_files, source_digest
from launcher.core.byte_tokenizer import BYTES, byte_tokenizer_files
from launcher.core.datasets import (
    DATASETS_SUBDIR,
    MANIFEST,
    SPLITS,
    TEXT_FEATURE,
    TOKENIZER_SUBDIR,
    Manifest,
    SplitStats,
    length_histogram,
    merge_histograms,
    shard_name,
    work_dir,
)
from launcher.core.errors import UsageError
from launcher.core.example_records import example_bytes
from launcher.core.tokenizers import infer_tokenizer_type, load_tokenizer, resolve_tokenizer_path

STATE = ".prepare-state.json"
DEFAULT_SHARD_MB = 64  # per shard, before tokenizing: many hosts read many shards at once


@dataclass(frozen=True)
class PrepareRequest:
    source: Path
    name: str
    output_dir: Path  # the bucket directory: the dataset goes in output_dir/datasets/name
    tokenizer: str = BYTES
    tokenizer_type: str | None = None
    eval_fraction: float = 0.05
    split_seed: int = 0
    fields: tuple[str, ...] = (TEXT_FEATURE,)  # one: a corpus; several: an instruction set
    shard_mb: float = DEFAULT_SHARD_MB
    overwrite: bool = False
    progress: bool = True

    @property
    def features(self) -> tuple[str, ...]:
        """The Example features written: `text` for a corpus (what MaxText's pretraining reads),
        the fields' own names for an instruction set (what its SFT pipeline matches)."""
        return (TEXT_FEATURE,) if len(self.fields) == 1 else self.fields


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


def split_of(text: str, seed: int, eval_fraction: float) -> str:
    """The same split for the same text on every run and every machine."""
    h = hashlib.sha256(f"{seed}\0{text}".encode()).digest()
    return "eval" if int.from_bytes(h[:8], "big") / 2**64 < eval_fraction else "train"


@dataclass
class Corpus:
    """The source read once: unique, non-empty documents by split, in source order."""

    docs: dict[str, list[tuple[str, ...]]]
    duplicates: int
    empty: int


def read_corpus(files: list[Path], request: PrepareRequest) -> Corpus:
    docs: dict[str, list[tuple[str, ...]]] = {split: [] for split in SPLITS}
    seen: set[bytes] = set()
    duplicates = empty = 0
    for path in files:
        for doc in documents(path, request.fields):
            if not all(text.strip() for text in doc):
                empty += 1
                continue
            text = "\0".join(doc)  # a corpus's document is its one text, as it always was
            key = hashlib.sha256(text.encode()).digest()
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            docs[split_of(text, request.split_seed, request.eval_fraction)].append(doc)
    total = sum(len(d) for d in docs.values())
    if not total:
        raise UsageError(
            field="SOURCE",
            problem=f"{request.source} holds no text ({empty} empty documents)",
            fix=f"check {field_option(request.fields)} and the files' contents",
        )
    if request.eval_fraction > 0 and not docs["eval"] and total > 1:
        docs["eval"].append(docs["train"].pop())  # a small corpus still gets an eval split
    return Corpus(docs, duplicates, empty)


def shard_counts(corpus: Corpus, shard_mb: float) -> dict[str, int]:
    counts = {}
    for split, docs in corpus.docs.items():
        size = sum(len(text.encode()) for doc in docs for text in doc)
        counts[split] = max(1, -(-size // int(shard_mb * 2**20))) if docs else 0
    return counts


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


def prepare(request: PrepareRequest) -> Manifest:
    """The dataset, made in its work directory and renamed into place whole (an earlier one of
    the same name, replaced by --overwrite, stays until then); a run that fails before its
    first shard leaves no work directory behind."""
    files = input_files(request.source)
    root = request.source if request.source.is_dir() else request.source.parent
    target = request.output_dir / DATASETS_SUBDIR / request.name
    tokenizer_path = request.tokenizer
    if tokenizer_path != BYTES:
        tokenizer_path = resolve_tokenizer_path(tokenizer_path)
    kind = request.tokenizer_type or (
        "huggingface" if tokenizer_path == BYTES else infer_tokenizer_type(tokenizer_path)
    )
    digest = source_digest(files, root)
    existing = _existing_manifest(target)
    if existing is not None:
        same = (
            existing.source_sha256 == digest
            and existing.tokenizer == request.tokenizer
            and existing.tokenizer_type == kind
            and existing.eval_fraction == request.eval_fraction
            and existing.split_seed == request.split_seed
            and existing.fields == list(request.features)
        )
        if same:
            _say(f"data: {target} is already prepared from this source; nothing to do")
            return existing
        if not request.overwrite:
            raise UsageError(
                field="--name",
                problem=f"dataset {request.name!r} at {target} was prepared from another source "
                "or with other settings",
                fix="pick another --name, or --overwrite to replace it (runs that trained on it "
                "keep their checkpoints, not its data)",
            )
    work = work_dir(target)
    kept = (work / STATE).is_file()  # an earlier run's finished shards: resumed, never removed
    try:
        manifest = _prepare_in(work, request, files, digest, tokenizer_path, kind)
    except BaseException:
        if not kept and not (work / STATE).is_file():
            shutil.rmtree(work, ignore_errors=True)
        raise
    if target.exists():
        shutil.rmtree(target)  # --overwrite: the new one is whole
    os.replace(work, target)  # the dataset is complete from here on
    return manifest


def _prepare_in(
    target: Path,
    request: PrepareRequest,
    files: list[Path],
    digest: str,
    tokenizer_path: str,
    kind: str,
) -> Manifest:
    target.mkdir(parents=True, exist_ok=True)
    tokenizer_dir = target / TOKENIZER_SUBDIR
    tokenizer_file = _copy_tokenizer(tokenizer_path, tokenizer_dir)
    tokenizer = load_tokenizer(str(tokenizer_file), kind, field="--tokenizer")

    _say(f"data: reading {len(files)} file(s) under {request.source}")
    corpus = read_corpus(files, request)
    settings = Settings(
        digest,
        request.tokenizer,
        kind,
        request.eval_fraction,
        request.split_seed,
        list(request.fields),
        shard_counts(corpus, request.shard_mb),
    )
    state = _load_state(target, settings)
    stats: dict[str, SplitStats] = {}
    total_docs = sum(len(d) for d in corpus.docs.values())
    bar = _progress(total_docs, request.progress)
    for split in SPLITS:
        docs, count = corpus.docs[split], settings.shards[split]
        names, examples, tokens, longest = [], 0, 0, 0
        for index in range(count):
            name = shard_name(split, index, count)
            part = docs[index * len(docs) // count : (index + 1) * len(docs) // count]
            done = state["shards"].get(name)
            if done is None or not _intact(target / name, done["sha256"]):
                lengths = [sum(len(tokenizer.encode(t)) for t in doc) for doc in part]
                write_shard(target / name, part, request.features)
                done = {
                    "examples": len(part),
                    "tokens": sum(lengths),
                    "longest": max(lengths, default=0),
                    "lengths": length_histogram(lengths),
                    "sha256": file_sha256(target / name),
                }
                state["shards"][name] = done
                _save_state(target, state)
            names.append(name)
            examples += done["examples"]
            tokens += done["tokens"]
            longest = max(longest, done["longest"])
            bar.update(len(part))
        # Every shard's lengths, or none (a state an older launcher wrote has none).
        parts = [state["shards"][n].get("lengths") for n in names]
        histogram = merge_histograms(parts) if all(p is not None for p in parts) else {}
        stats[split] = SplitStats(examples, tokens, names, longest, histogram)
    bar.close()
    checksum = hashlib.sha256(
        "".join(state["shards"][n]["sha256"] for s in SPLITS for n in stats[s].shards).encode()
    ).hexdigest()
    manifest = Manifest(
        name=request.name,
        source=str(request.source),
        source_sha256=digest,
        tokenizer=request.tokenizer,
        tokenizer_type=kind,
        tokenizer_path=str(tokenizer_file.relative_to(target)),
        vocab_size=tokenizer.vocab_size,
        eval_fraction=request.eval_fraction,
        split_seed=request.split_seed,
        train=stats["train"],
        eval=stats["eval"],
        duplicates_dropped=corpus.duplicates,
        empty_dropped=corpus.empty,
        checksum=checksum,
        fields=list(request.features),
    )
    (target / MANIFEST).write_text(manifest.to_json())
    (target / STATE).unlink(missing_ok=True)
    return manifest


def _existing_manifest(target: Path) -> Manifest | None:
    path = target / MANIFEST
    return Manifest.from_json(path.read_text()) if path.is_file() else None


def _copy_tokenizer(tokenizer: str, directory: Path) -> Path:
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


def _load_state(target: Path, settings: Settings) -> dict:
    """The finished shards of an earlier run with the same settings; else a fresh state."""
    fresh = {"settings": asdict(settings), "shards": {}}
    try:
        state = json.loads((target / STATE).read_text())
    except (OSError, ValueError):
        return fresh
    if state.get("settings") != fresh["settings"]:
        return fresh
    _say(f"data: resuming: {len(state['shards'])} shard(s) already written")
    return state


def _save_state(target: Path, state: dict) -> None:
    partial = target / (STATE + ".partial")
    partial.write_text(json.dumps(state, indent=1))
    os.replace(partial, target / STATE)


def _intact(path: Path, sha256: str) -> bool:
    return path.is_file() and file_sha256(path) == sha256


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, show: bool):
    if not show:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="doc", desc="data: tokenizing", file=sys.stderr)


def _say(line: str) -> None:
    print(line, file=sys.stderr)
