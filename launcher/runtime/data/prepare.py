"""`data prepare` as a Ray job on the cluster (`tpu-launcher data prepare --release R` submits
it): Ray Data spreads the work over the cluster's CPU hosts, reading the source where it is (a
directory the hosts mount, or gs://) and writing the shards where the job's hosts read them.

Three steps, the same rules as the workstation's path (launcher.core.data.shards), so the same
input gives byte-identical shards and the same manifest checksum:

1. scan, a task per file: its sha256 and, per document, a hash of its text, its split, its
   size, whether it is empty, where its line starts (and its MinHash bands when near duplicates
   are asked for): 34 bytes a document come back (8 more a band), never the text;
2. on the driver, the index: the first of each exact duplicate kept (numpy's unique over the
   documents in source order), near duplicates dropped, each split's shards and which documents
   each holds: about 100 bytes a document at the peak besides the scans' 34, 6.8 GB for 50
   million documents (100 GB of 2 kB documents; `benchmarks/data_prepare.py` measures it);
3. write, a task per shard: it reads again only the files its documents are in (a JSONL file
   from its first document's line), tokenizes to count, writes the ArrayRecord shard and returns
   its record; the driver records each finished shard in the state file as it comes, so a job
   cut short resumes at the first unfinished one, and writes the manifest last.

The tasks run on the head and CPU hosts only (a label selector of those nodes' ids), never on a
TPU slice's hosts unless `--on-tpu-hosts` says so.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from launcher.core.data.datasets import (
    MANIFEST,
    SPLITS,
    TOKENIZER_SUBDIR,
    Manifest,
    dataset_dir,
    shard_name,
)
from launcher.core.data.shards import (
    STATE,
    PrepareRequest,
    Settings,
    copy_tokenizer,
    document_key,
    document_size,
    document_text,
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
    JSONL_SUFFIXES,
    SourceFile,
    digest_of,
    documents,
    field_option,
    input_files,
)
from launcher.core.errors import UsageError
from launcher.core.gcs import is_gcs_url, split_url

PROGRESS_EVERY_S = 5.0
# The state file is written at most this often: Cloud Storage takes about one write a second to
# one object ("Maximum rate of writes to the same object name"); a shard finished since the last
# write is written again by a resumed run.
STATE_EVERY_S = 2.0
# A document's text hash as the driver compares them: the first 128 bits of its SHA-256. Two
# different documents among 10^9 share one with odds of about 10^-21 (the birthday bound); the
# workstation compares all 256 bits, and the two agree unless that happens.
KEY_BYTES = 16


# --- where the dataset goes: a directory the hosts mount, or gs:// ---------------------------


class Store:
    """The dataset's directory: files by their name in it, each written whole."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def read(self, name: str) -> str | None:
        if is_gcs_url(self.url):
            blob = self._blob(name)
            return blob.download_as_text() if blob.exists() else None
        path = Path(self.url) / name
        return path.read_text() if path.is_file() else None

    def write(self, name: str, text: str) -> None:
        if is_gcs_url(self.url):
            self._blob(name).upload_from_string(text)  # an object is whole or absent
            return
        path = Path(self.url) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(text)
        os.replace(partial, path)

    def delete(self, name: str) -> None:
        if is_gcs_url(self.url):
            blob = self._blob(name)
            if blob.exists():
                blob.delete()
        else:
            (Path(self.url) / name).unlink(missing_ok=True)

    def remove_all(self) -> None:
        """--overwrite: the manifest first (from then on no dataset looks complete here)."""
        self.delete(MANIFEST)
        if is_gcs_url(self.url):
            bucket, prefix = split_url(self.url, "--output-dir")
            from launcher.core.gcs import storage_client

            for blob in storage_client().list_blobs(bucket, prefix=prefix + "/"):
                blob.delete()
        else:
            shutil.rmtree(self.url, ignore_errors=True)

    def intact(self, name: str, record: dict) -> bool:
        """A finished shard is still there: on GCS by its size (an object is whole or absent),
        in a directory by its sha256."""
        if is_gcs_url(self.url):
            blob = self._blob(name)
            if not blob.exists():
                return False
            blob.reload()
            return blob.size == record.get("size")
        from launcher.core.data.shards import file_sha256

        path = Path(self.url) / name
        return path.is_file() and file_sha256(path) == record["sha256"]

    def put_tree(self, local: Path, under: str) -> None:
        """A local directory's files, e.g. the tokenizer, into `under`/."""
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            name = f"{under}/{path.relative_to(local).as_posix()}"
            if is_gcs_url(self.url):
                self._blob(name).upload_from_filename(str(path))
            else:
                (Path(self.url) / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, Path(self.url) / name)

    def _blob(self, name: str):
        from launcher.core.gcs import storage_client

        bucket, prefix = split_url(self.url, "--output-dir")
        return storage_client().bucket(bucket).blob(f"{prefix}/{name}".lstrip("/"))


# --- 1. scan: a task per file -------------------------------------------------------------------


class _ReadAs:
    """A source file read another way, named and parsed as the original (its messages too)."""

    original: SourceFile

    @property
    def name(self) -> str:
        return self.original.name

    @property
    def suffix(self) -> str:
        return self.original.suffix

    def __str__(self) -> str:
        return str(self.original)


@dataclass(frozen=True)
class BytesFile(_ReadAs):
    """A file already read."""

    original: SourceFile
    data: bytes

    def open(self) -> BinaryIO:
        return io.BytesIO(self.data)


@dataclass(frozen=True)
class FromOffset(_ReadAs):
    """A JSONL file read from a line's byte offset on: the documents from that line on."""

    original: SourceFile
    offset: int

    def open(self) -> BinaryIO:
        f = self.original.open()
        f.seek(self.offset)
        return f


def _line_offsets(data: bytes) -> np.ndarray | None:
    """Where each non-blank line starts, as the JSONL reader counts documents; None where a
    carriage return could make the text reader's lines differ from these."""
    if b"\r" in data:
        return None
    starts, at = [], 0
    for line in data.split(b"\n"):
        if line.strip():
            starts.append(at)
        at += len(line) + 1
    return np.array(starts, dtype=np.int64)


def scan_file(
    file: SourceFile, fields: tuple[str, ...], seed: int, eval_fraction: float, near: float | None
) -> dict[str, Any]:
    """One file's sha256 and its documents' keys, splits, sizes and emptiness, in file order."""
    from launcher.core.data.near_duplicates import band_keys, bands_for

    with file.open() as f:
        data = f.read()
    keys, splits, sizes, empty, bands = [], [], [], [], []
    no_bands = np.zeros(bands_for(near)[0] if near else 0, dtype=np.uint64)
    for doc in documents(BytesFile(file, data), fields):
        blank = is_empty(doc)
        text = document_text(doc)
        empty.append(blank)
        keys.append(b"\0" * KEY_BYTES if blank else document_key(doc)[:KEY_BYTES])
        splits.append(0 if blank else SPLITS.index(split_of(text, seed, eval_fraction)))
        sizes.append(document_size(doc))
        if near:
            bands.append(no_bands if blank else band_keys(text, near))
    offsets = _line_offsets(data) if file.suffix in JSONL_SUFFIXES else None
    if offsets is not None and len(offsets) != len(keys):
        offsets = None
    return {
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "keys": b"".join(keys),
        "splits": np.array(splits, dtype=np.int8).tobytes(),
        "sizes": np.array(sizes, dtype=np.int64).tobytes(),
        "empty": np.array(empty, dtype=bool).tobytes(),
        "bands": np.array(bands, dtype=np.uint64).tobytes() if near else b"",
        "offsets": offsets.tobytes() if offsets is not None else b"",
    }


def _scan_batch(batch: dict[str, np.ndarray], **kwargs: Any) -> dict[str, np.ndarray]:
    files, request = kwargs["files"], kwargs["request"]
    rows = []
    for index in batch["file"]:
        found = scan_file(
            files[int(index)],
            request.fields,
            request.split_seed,
            request.eval_fraction,
            request.near_duplicates,
        )
        rows.append({"file": int(index), "node": _node_id(), **found})
    return {k: np.array([r[k] for r in rows], dtype=object) for k in rows[0]}


@dataclass(frozen=True)
class Scan:
    file: int
    sha256: str
    bytes: int
    keys: np.ndarray  # (documents, KEY_BYTES) uint8
    splits: np.ndarray  # 0 train, 1 eval
    sizes: np.ndarray
    empty: np.ndarray
    bands: np.ndarray  # (documents, bands) uint64, or (documents, 0)
    offsets: np.ndarray | None

    @classmethod
    def of(cls, row: dict[str, Any], bands: int) -> Scan:
        n = len(row["empty"])
        return cls(
            int(row["file"]),
            str(row["sha256"]),
            int(row["bytes"]),
            np.frombuffer(row["keys"], dtype=np.uint8).reshape(n, KEY_BYTES),
            np.frombuffer(row["splits"], dtype=np.int8),
            np.frombuffer(row["sizes"], dtype=np.int64),
            np.frombuffer(row["empty"], dtype=bool),
            np.frombuffer(row["bands"], dtype=np.uint64).reshape(n, bands),
            np.frombuffer(row["offsets"], dtype=np.int64) if row["offsets"] else None,
        )


# --- 2. the index, on the driver -----------------------------------------------------------------


@dataclass(frozen=True)
class ShardPlan:
    """A shard's documents: file and document numbers, in source order (12 bytes each), and
    where each of its JSONL files' first document starts (-1: read the file from its start)."""

    split: str
    index: int
    count: int
    files: np.ndarray  # int32, a document's file
    docs: np.ndarray  # int64, its number in that file
    starts: dict[int, int]  # file -> byte offset of its first document in this shard
    size: int  # the shard's text in bytes

    @property
    def name(self) -> str:
        return shard_name(self.split, self.index, self.count)

    def by_file(self) -> list[tuple[int, np.ndarray]]:
        """(file, its documents in this shard), files in order."""
        cuts = np.flatnonzero(np.diff(self.files)) + 1
        return [
            (int(f[0]), d)
            for f, d in zip(np.split(self.files, cuts), np.split(self.docs, cuts), strict=True)
        ]

    def to_row(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "index": self.index,
            "count": self.count,
            "files": self.files.astype(np.int32).tobytes(),
            "docs": self.docs.astype(np.int64).tobytes(),
            "starts": json.dumps(self.starts),
            "size": self.size,
        }

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> ShardPlan:
        return cls(
            str(row["split"]),
            int(row["index"]),
            int(row["count"]),
            np.frombuffer(row["files"], dtype=np.int32),
            np.frombuffer(row["docs"], dtype=np.int64),
            {int(k): v for k, v in json.loads(row["starts"]).items()},
            int(row["size"]),
        )


@dataclass(frozen=True)
class Index:
    plans: list[ShardPlan]
    shards: dict[str, int]
    duplicates: int
    empty: int
    near_duplicates: int
    documents: int


def build_index(scans: list[Scan], request: PrepareRequest) -> Index:
    """The workstation path's rules over every document at once (read_corpus, shard_counts)."""
    from launcher.core.data.near_duplicates import near_duplicate_mask

    counts = [len(s.empty) for s in scans]
    file_of = np.repeat(np.arange(len(scans), dtype=np.int32), counts)
    doc_of = np.concatenate([np.arange(c, dtype=np.int64) for c in counts])
    empty = np.concatenate([s.empty for s in scans])
    present = np.flatnonzero(~empty)
    keys = np.concatenate([s.keys for s in scans])[present]
    _, first = np.unique(keys.view(np.dtype((np.void, KEY_BYTES))).ravel(), return_index=True)
    unique = np.sort(present[first])
    kept = unique
    near = 0
    if request.near_duplicates:
        mask = near_duplicate_mask(np.concatenate([s.bands for s in scans])[unique])
        near, kept = int(mask.sum()), unique[~mask]
    if not len(kept):
        raise UsageError(
            field="SOURCE",
            problem=f"{request.source} holds no text ({int(empty.sum())} empty documents)",
            fix=f"check {field_option(request.fields)} and the files' contents",
        )
    splits = np.concatenate([s.splits for s in scans])[kept].copy()
    sizes = np.concatenate([s.sizes for s in scans])[kept]
    if request.eval_fraction > 0 and not (splits == 1).any() and len(kept) > 1:
        splits[-1] = 1  # a small corpus still gets an eval split: the last train document
    plans, shards = [], {}
    for code, split in enumerate(SPLITS):
        members = np.flatnonzero(splits == code)
        n = len(members)
        count = shard_count(int(sizes[members].sum()), n, request.shard_mb)
        shards[split] = count
        for k in range(count):
            part = members[k * n // count : (k + 1) * n // count]
            files, docs = file_of[kept[part]], doc_of[kept[part]]
            plan = ShardPlan(split, k, count, files, docs, {}, int(sizes[part].sum()))
            for f, wanted in plan.by_file():
                offsets = scans[f].offsets
                plan.starts[f] = int(offsets[wanted[0]]) if offsets is not None else -1
            plans.append(plan)
    return Index(
        plans,
        shards,
        duplicates=len(present) - len(unique),
        empty=int(empty.sum()),
        near_duplicates=near,
        documents=len(kept),
    )


# --- 3. write: a task per shard ------------------------------------------------------------------


def write_planned_shard(
    plan: ShardPlan,
    files: list[SourceFile],
    request: PrepareRequest,
    target: str,
    tokenizer_path: str,
    kind: str,
) -> dict:
    """Reads the plan's documents from their files, writes the shard into `target` and returns
    its record (what the state and the manifest keep)."""
    docs: list[tuple[str, ...]] = []
    for file_index, wanted in plan.by_file():  # each file's documents in file order
        file, start = files[file_index], plan.starts[file_index]
        base = int(wanted[0]) if start >= 0 else 0
        source = FromOffset(file, start) if start >= 0 else file
        picked, last = set(wanted.tolist()), int(wanted[-1])
        for number, doc in enumerate(documents(source, request.fields), start=base):
            if number in picked:
                docs.append(doc)
            if number >= last:
                break
    tokenizer = _tokenizer(tokenizer_path, kind)
    if is_gcs_url(target):
        with tempfile.TemporaryDirectory(prefix="prepare-") as tmp:
            path = Path(tmp) / plan.name
            record = make_shard(path, docs, request.features, tokenizer)
            record["size"] = path.stat().st_size
            Store(target)._blob(plan.name).upload_from_filename(str(path))
    else:
        path = Path(target) / plan.name
        record = make_shard(path, docs, request.features, tokenizer)
        record["size"] = path.stat().st_size
    return record


@cache
def _tokenizer(tokenizer_path: str, kind: str):
    """The tokenizer, copied once per worker process as the dataset's own copy is made."""
    from launcher.core.data.tokenizers import load_tokenizer

    copied = copy_tokenizer(tokenizer_path, Path(tempfile.mkdtemp(prefix="prepare-tok-")))
    return load_tokenizer(str(copied), kind, field="--tokenizer")


def _write_batch(batch: dict[str, np.ndarray], **kwargs: Any) -> dict[str, np.ndarray]:
    names, records = [], []
    for i in range(len(batch["split"])):
        plan = ShardPlan.of_row({k: v[i] for k, v in batch.items()})
        names.append(plan.name)
        records.append(json.dumps(write_planned_shard(plan, **kwargs)))
    return {
        "name": np.array(names, dtype=object),
        "record": np.array(records, dtype=object),
        "node": np.array([_node_id()] * len(names), dtype=object),
    }


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


# --- the driver ----------------------------------------------------------------------------------


def cpu_hosts_selector(tpu_hosts: bool) -> dict[str, Any]:
    """Ray's remote args that keep the tasks off every TPU slice's hosts (unless `tpu_hosts`):
    a label selector of the other live nodes' ids."""
    import ray

    if tpu_hosts:
        return {}
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpu = [n for n in nodes if not n.get("Resources", {}).get("TPU")]
    if not any(n.get("Resources", {}).get("CPU") for n in cpu):
        raise UsageError(
            field="--on-tpu-hosts",
            problem="no node of this cluster but a TPU slice's hosts has CPUs for the work "
            f"({len(nodes)} live nodes)",
            fix="give the head CPUs, add a CPU worker group, or pass --on-tpu-hosts while the "
            "slices are idle",
        )
    from launcher.runtime.borrowed.ray import nodes_selector

    return {"label_selector": nodes_selector([n["NodeID"] for n in cpu])}


def where_it_ran(node_ids: set[str]) -> str:
    """Which hosts the tasks ran on, by kind: the head, CPU hosts, TPU slices' hosts."""
    import ray

    from launcher.core.tpu.slices import LABEL_SLICE

    kinds = []
    for node in ray.nodes():
        if node["NodeID"] not in node_ids:
            continue
        if node.get("Resources", {}).get("TPU"):
            kinds.append(f"TPU host of {node.get('Labels', {}).get(LABEL_SLICE, 'a slice')}")
        elif node.get("Resources", {}).get("node:__internal_head__"):
            kinds.append("the head")
        else:
            kinds.append("a CPU host")
    tpu = sum(k.startswith("TPU") for k in kinds)
    return (
        f"the tasks ran on {len(node_ids)} node(s): {', '.join(sorted(kinds))}; "
        f"{tpu} of them TPU hosts"
    )


class Progress:
    """Lines a person reads in `submit`'s view: what is done, its rate and what is left."""

    def __init__(self, what: str, total_items: int, total_bytes: int, unit: str) -> None:
        self.what, self.unit = what, unit
        self.total_items, self.total_bytes = total_items, total_bytes
        self.items = self.docs = self.bytes = 0
        self.start = self.last = time.monotonic()

    def add(self, docs: int, size: int) -> None:
        self.items += 1
        self.docs += docs
        self.bytes += size
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S or self.items == self.total_items:
            self.last = now
            self.say()

    def say(self) -> None:
        took = max(time.monotonic() - self.start, 1e-6)
        rate = self.bytes / took
        if self.total_bytes:  # what is left of the text, at the rate so far
            left = (self.total_bytes - self.bytes) / rate if rate else 0.0
        else:  # sizes not known before: what is left of the items
            left = took * (self.total_items - self.items) / max(self.items, 1)
        print(
            f"data: {self.what} {self.items}/{self.total_items} {self.unit}, "
            f"{self.docs:,} documents, {self.bytes / 1e6:,.1f} MB, {rate / 1e6:,.2f} MB/s, "
            f"ETA {left:,.0f} s",
            flush=True,
        )


def prepare_on_ray(
    request: PrepareRequest, parallelism: int | None = None, tpu_hosts: bool = False
) -> Manifest:
    import ray

    if not ray.is_initialized():
        ray.init(log_to_driver=False)
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False  # ours say it in lines
    placement = cpu_hosts_selector(tpu_hosts)
    files = input_files(str(request.source))
    target = dataset_dir(str(request.output_dir), request.name)
    store = Store(target)
    tokenizer_path, kind = tokenizer_of(request)
    pool = ray.data.TaskPoolStrategy(size=parallelism) if parallelism else None
    print(
        f"data: {len(files)} file(s) under {request.source} -> {target}, "
        f"{f'{parallelism} task(s)' if parallelism else 'as many tasks as fit'} at once, on "
        f"{'every host' if tpu_hosts else 'the head and CPU hosts'}",
        flush=True,
    )

    from launcher.core.data.near_duplicates import bands_for

    bands = bands_for(request.near_duplicates)[0] if request.near_duplicates else 0
    scanned = ray.data.from_items(
        [{"file": i} for i in range(len(files))], override_num_blocks=len(files)
    ).map_batches(
        _scan_batch,
        batch_size=1,
        fn_kwargs={"files": files, "request": request},
        compute=pool,
        **placement,
    )
    scans: list[Scan] = []
    progress = Progress("scanned", len(files), 0, "files")
    worked: set[str] = set()
    for row in scanned.iter_rows():
        worked.add(row["node"])
        scans.append(Scan.of(row, bands))
        progress.add(len(scans[-1].empty), scans[-1].bytes)
    scans.sort(key=lambda s: s.file)
    digest = digest_of([(files[s.file].name, s.sha256) for s in scans])

    existing_text = store.read(MANIFEST)
    if existing_text is not None:
        existing = Manifest.from_json(existing_text)
        if same_settings(existing, request, digest, kind):
            print(f"data: {target} is already prepared from this source; nothing to do")
            return existing
        if not request.overwrite:
            raise refuse_other_dataset(request, target)
        store.remove_all()

    index = build_index(scans, request)
    settings = Settings.of(request, digest, kind, index.shards)
    state = resumed_state(store.read(STATE), settings)
    done = {n for n, r in state["shards"].items() if store.intact(n, r)}
    if done:
        print(f"data: resuming: {len(done)} shard(s) already written", flush=True)
    state["shards"] = {n: r for n, r in state["shards"].items() if n in done}

    with tempfile.TemporaryDirectory(prefix="prepare-tokenizer-") as tmp:
        copied = copy_tokenizer(tokenizer_path, Path(tmp) / TOKENIZER_SUBDIR)
        store.put_tree(Path(tmp) / TOKENIZER_SUBDIR, TOKENIZER_SUBDIR)
        relative = copied.relative_to(tmp).as_posix()
        from launcher.core.data.tokenizers import load_tokenizer

        vocab_size = load_tokenizer(str(copied), kind, field="--tokenizer").vocab_size
    # The write tasks load the tokenizer from where it was given: a path every host reads as
    # this one does (the image's assets, the bucket's mount), or the bytes one they make.
    todo = [p for p in index.plans if p.name not in done]
    del scans  # the plans hold what the writes need
    if todo:
        written = ray.data.from_items(
            [p.to_row() for p in todo], override_num_blocks=len(todo)
        ).map_batches(
            _write_batch,
            batch_size=1,
            fn_kwargs={
                "files": files,
                "request": request,
                "target": target,
                "tokenizer_path": tokenizer_path,
                "kind": kind,
            },
            compute=pool,
            **placement,
        )
        sizes = {p.name: p for p in todo}
        progress = Progress("wrote", len(todo), sum(p.size for p in todo), "shards")
        saved = time.monotonic()
        try:
            for row in written.iter_rows():
                worked.add(row["node"])
                state["shards"][row["name"]] = json.loads(row["record"])
                progress.add(state["shards"][row["name"]]["examples"], sizes[row["name"]].size)
                if time.monotonic() - saved >= STATE_EVERY_S:
                    store.write(STATE, json.dumps(state, indent=1))
                    saved = time.monotonic()
        finally:  # a write that failed: what finished is kept for the next run
            store.write(STATE, json.dumps(state, indent=1))
    print(f"data: {where_it_ran(worked)}", flush=True)
    names = {s: [p.name for p in index.plans if p.split == s] for s in SPLITS}
    manifest = manifest_of(
        request,
        settings,
        state,
        names,
        tokenizer_path=relative,
        vocab_size=vocab_size,
        dropped=(index.duplicates, index.empty, index.near_duplicates),
    )
    store.write(MANIFEST, manifest.to_json())  # the dataset is complete from here on
    store.delete(STATE)
    return manifest
