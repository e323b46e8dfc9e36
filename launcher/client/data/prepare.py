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

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from launcher.core.data.datasets import (
    DATASETS_SUBDIR,
    MANIFEST,
    SPLITS,
    TOKENIZER_SUBDIR,
    Manifest,
    shard_name,
    work_dir,
)
from launcher.core.data.shards import (
    STATE,
    PrepareRequest,
    Settings,
    copy_tokenizer,
    document_key,
    document_size,
    document_text,
    file_sha256,
    is_empty,
    make_shard,
    manifest_of,
    refuse_other_dataset,
    resumed_state,
    same_settings,
    shard_count,
    split_of,
    tokenizer_of,
)
from launcher.core.data.sources import (
    SourceFile,
    documents,
    field_option,
    input_files,
    source_digest,
)
from launcher.core.data.tokenizers import load_tokenizer
from launcher.core.errors import UsageError

__all__ = ["STATE", "PrepareRequest", "prepare", "split_of"]


@dataclass
class Corpus:
    """The source read once: unique, non-empty documents by split, in source order."""

    docs: dict[str, list[tuple[str, ...]]]
    duplicates: int
    empty: int
    near_duplicates: int = 0


def read_corpus(files: list[SourceFile], request: PrepareRequest) -> Corpus:
    from launcher.core.data.near_duplicates import NearDuplicates

    docs: dict[str, list[tuple[str, ...]]] = {split: [] for split in SPLITS}
    seen: set[bytes] = set()
    near = NearDuplicates(request.near_duplicates) if request.near_duplicates else None
    duplicates = empty = near_duplicates = 0
    for path in files:
        for doc in documents(path, request.fields):
            if is_empty(doc):
                empty += 1
                continue
            key = document_key(doc)
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            text = document_text(doc)
            if near is not None and near.seen(text):
                near_duplicates += 1
                continue
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
    return Corpus(docs, duplicates, empty, near_duplicates)


def shard_counts(corpus: Corpus, shard_mb: float) -> dict[str, int]:
    return {
        split: shard_count(sum(document_size(d) for d in docs), len(docs), shard_mb)
        for split, docs in corpus.docs.items()
    }


def _legacy_digest(files: list[SourceFile]) -> str:
    """The source digest earlier builds of 0.1.0 wrote (names and bytes in one stream): a
    dataset they prepared is still recognised as prepared from this source."""
    import hashlib

    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0")
        with file.open() as f:
            while block := f.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


def prepare(request: PrepareRequest) -> Manifest:
    """The dataset, made in its work directory and renamed into place whole (an earlier one of
    the same name, replaced by --overwrite, stays until then); a run that fails before its
    first shard leaves no work directory behind."""
    source = Path(request.source)
    files = input_files(source)
    target = Path(request.output_dir) / DATASETS_SUBDIR / request.name
    tokenizer_path, kind = tokenizer_of(request)
    digest = source_digest(files)
    existing = _existing_manifest(target)
    if existing is not None:
        if same_settings(existing, request, digest, kind) or same_settings(
            existing, request, _legacy_digest(files), kind
        ):
            _say(f"data: {target} is already prepared from this source; nothing to do")
            return existing
        if not request.overwrite:
            raise refuse_other_dataset(request, target)
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
    files: list[SourceFile],
    digest: str,
    tokenizer_path: str,
    kind: str,
) -> Manifest:
    target.mkdir(parents=True, exist_ok=True)
    tokenizer_file = copy_tokenizer(tokenizer_path, target / TOKENIZER_SUBDIR)
    tokenizer = load_tokenizer(str(tokenizer_file), kind, field="--tokenizer")

    _say(f"data: reading {len(files)} file(s) under {request.source}")
    corpus = read_corpus(files, request)
    settings = Settings.of(request, digest, kind, shard_counts(corpus, request.shard_mb))
    state = _load_state(target, settings)
    names: dict[str, list[str]] = {}
    total_docs = sum(len(d) for d in corpus.docs.values())
    bar = _progress(total_docs, request.progress)
    for split in SPLITS:
        docs, count = corpus.docs[split], settings.shards[split]
        names[split] = []
        for index in range(count):
            name = shard_name(split, index, count)
            part = docs[index * len(docs) // count : (index + 1) * len(docs) // count]
            done = state["shards"].get(name)
            if done is None or not _intact(target / name, done["sha256"]):
                state["shards"][name] = make_shard(target / name, part, request.features, tokenizer)
                _save_state(target, state)
            names[split].append(name)
            bar.update(len(part))
    bar.close()
    manifest = manifest_of(
        request,
        settings,
        state,
        names,
        tokenizer_path=str(tokenizer_file.relative_to(target)),
        vocab_size=tokenizer.vocab_size,
        dropped=(corpus.duplicates, corpus.empty, corpus.near_duplicates),
    )
    (target / MANIFEST).write_text(manifest.to_json())
    (target / STATE).unlink(missing_ok=True)
    return manifest


def _existing_manifest(target: Path) -> Manifest | None:
    path = target / MANIFEST
    return Manifest.from_json(path.read_text()) if path.is_file() else None


def _load_state(target: Path, settings: Settings) -> dict:
    """The finished shards of an earlier run with the same settings; else a fresh state."""
    path = target / STATE
    state = resumed_state(path.read_text() if path.is_file() else None, settings)
    if state["shards"]:
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
