"""A corpus's files as `data prepare` reads them, on a workstation or a cluster's hosts alike:
which files are documents (.txt/.md: one a file; JSONL: one a line; Parquet: one a row), each
document's fields' text, and a digest of the whole input (a changed input is a new dataset). A
file is a local path or a Cloud Storage object, read the same way. Bad input is named with its
file and line."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from launcher.core.errors import UsageError
from launcher.core.gcs import split_url

TEXT_SUFFIXES = (".txt", ".md")
JSONL_SUFFIXES = (".jsonl", ".json")
PARQUET_SUFFIXES = (".parquet",)
SUFFIXES = TEXT_SUFFIXES + JSONL_SUFFIXES + PARQUET_SUFFIXES
_FIX_SOURCE = "give a file or a directory of .txt/.md, .jsonl or .parquet files"


class SourceFile(Protocol):
    """One input file, wherever it is."""

    @property
    def name(self) -> str:
        """Its path under the source (what the digest names it by: the same corpus in a
        directory and under a gs:// prefix has the same digest)."""
        ...

    @property
    def suffix(self) -> str: ...

    def open(self) -> BinaryIO: ...


@dataclass(frozen=True)
class LocalFile:
    path: Path
    root: Path

    @property
    def name(self) -> str:
        return (
            self.path.relative_to(self.root).as_posix()
            if self.path != self.root
            else self.path.name
        )

    @property
    def suffix(self) -> str:
        return self.path.suffix

    def open(self) -> BinaryIO:
        return self.path.open("rb")

    def __str__(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class GcsFile:
    bucket: str
    object_name: str
    prefix: str  # the source's prefix: name is the object's path under it

    @property
    def name(self) -> str:
        return self.object_name[len(self.prefix) :].lstrip("/") or Path(self.object_name).name

    @property
    def suffix(self) -> str:
        return Path(self.object_name).suffix

    def open(self) -> BinaryIO:
        from launcher.core.gcs import storage_client

        reader: BinaryIO = storage_client().bucket(self.bucket).blob(self.object_name).open("rb")
        return reader

    def __str__(self) -> str:
        return f"gs://{self.bucket}/{self.object_name}"


def _is_document(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return Path(base).suffix in SUFFIXES and not base.startswith(".")


def input_files(source: str | Path) -> list[SourceFile]:
    """The source's document files, sorted by their path: a local file or directory, or a
    gs://BUCKET/prefix (an object or every object under it)."""
    if isinstance(source, str) and source.startswith("gs://"):
        return _gcs_files(source)
    source = Path(source)
    if not source.exists():
        raise UsageError(field="SOURCE", problem=f"{source} does not exist", fix=_FIX_SOURCE)
    root = source if source.is_dir() else source.parent
    files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
    found: list[SourceFile] = [LocalFile(p, root) for p in files if _is_document(p.name)]
    if not found:
        raise UsageError(
            field="SOURCE",
            problem=f"no .txt, .md, .jsonl or .parquet file in {source}",
            fix="point at the corpus's directory; other files are not read",
        )
    return found


def _gcs_files(url: str) -> list[SourceFile]:
    from launcher.core.gcs import storage_client

    bucket, prefix = split_url(url, "SOURCE")
    client = storage_client()
    exact = client.bucket(bucket).blob(prefix) if prefix else None
    if exact is not None and exact.exists():  # one object: its name under its "directory"
        return [GcsFile(bucket, prefix, prefix.rsplit("/", 1)[0] if "/" in prefix else "")]
    under = f"{prefix}/" if prefix else ""
    # In the order a directory's files are (pathlib's: by path part), not by the whole name:
    # "a/b.jsonl" before "a-c.jsonl" on either road, so their shards are the same.
    names = sorted((b.name for b in client.list_blobs(bucket, prefix=under)), key=_path_parts)
    found: list[SourceFile] = [GcsFile(bucket, n, prefix) for n in names if _is_document(n)]
    if not found:
        raise UsageError(
            field="SOURCE",
            problem=f"no .txt, .md, .jsonl or .parquet object under {url}",
            fix="point at the corpus's prefix; other objects are not read",
        )
    return found


def _path_parts(name: str) -> list[str]:
    return name.split("/")


def digest_of(named_sha256s: list[tuple[str, str]]) -> str:
    """The source's digest from each file's name and sha256, in order: computed on one machine
    or from many hosts' hashes alike."""
    digest = hashlib.sha256()
    for name, sha in named_sha256s:
        digest.update(f"{name}\0{sha}\n".encode())
    return digest.hexdigest()


def file_sha256(file: SourceFile) -> str:
    digest = hashlib.sha256()
    with file.open() as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def source_digest(files: list[SourceFile]) -> str:
    return digest_of([(f.name, file_sha256(f)) for f in files])


def documents(path: SourceFile, fields: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The documents of one file, each its fields' text: a .txt/.md file is one, a JSONL line
    one, a Parquet row one."""
    try:
        if path.suffix in TEXT_SUFFIXES and len(fields) == 1:
            with path.open() as f:  # universal newlines, as Path.read_text
                yield (io.TextIOWrapper(f, encoding="utf-8").read(),)
        elif path.suffix in TEXT_SUFFIXES:
            raise UsageError(
                field="--fields",
                problem=f"{path} is plain text; an instruction set's {', '.join(fields)} are "
                "fields of JSONL lines or Parquet rows",
                fix="give JSONL (one example a line) or Parquet",
            )
        elif path.suffix in JSONL_SUFFIXES:
            yield from _jsonl(path, fields)
        else:
            yield from _parquet(path, fields)
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(
            field="SOURCE",
            problem=f"{path} cannot be read as text ({e})",
            fix="remove or fix that file (UTF-8 text is expected), then run again: it resumes",
        ) from None


def _jsonl(path: SourceFile, fields: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    with path.open() as raw:
        for number, line in enumerate(io.TextIOWrapper(raw, encoding="utf-8"), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                raise UsageError(
                    field="SOURCE",
                    problem=f"{path}:{number} is not JSON ({e.args[0]})",
                    fix="one JSON object per line, its text in the field --text-field names",
                ) from None
            values = [record.get(f) if isinstance(record, dict) else None for f in fields]
            for name, text in zip(fields, values, strict=True):
                if isinstance(record, dict) and name in record and not isinstance(text, str):
                    raise UsageError(
                        field=field_option(fields),
                        problem=f"{path}:{number}: field {name!r} holds a "
                        f"{type(text).__name__}, not text",
                        fix=f"make it a string there, or name the field that holds the text: "
                        f"{field_option(fields)} ...",
                    )
                if not isinstance(text, str):
                    raise UsageError(
                        field=field_option(fields),
                        problem=f"{path}:{number} has no field {name!r} (its fields: "
                        f"{', '.join(record) if isinstance(record, dict) else 'none'})",
                        fix=f"name the fields that hold the text: {field_option(fields)} ...",
                    )
            yield tuple(str(v) for v in values)


def field_option(fields: tuple[str, ...]) -> str:
    return "--text-field" if len(fields) == 1 else "--fields"


def _parquet(path: SourceFile, fields: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    with path.open() as handle:
        yield from _parquet_rows(path, handle, fields)


def _parquet_rows(
    path: SourceFile, handle: BinaryIO, fields: tuple[str, ...]
) -> Iterator[tuple[str, ...]]:
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(handle)
    except Exception as e:  # pyarrow raises its own ArrowInvalid for a file that is not Parquet
        raise UsageError(
            field="SOURCE",
            problem=f"{path} is not a Parquet file ({e})",
            fix="remove or fix that file, then run again: it resumes",
        ) from None
    missing = [f for f in fields if f not in table.schema_arrow.names]
    if missing:
        raise UsageError(
            field=field_option(fields),
            problem=f"{path} has no column {missing[0]!r} (its columns: "
            f"{', '.join(table.schema_arrow.names)})",
            fix=f"name the columns that hold the text: {field_option(fields)} ...",
        )
    import pyarrow as pa

    for name in fields:
        kind = table.schema_arrow.field(name).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise UsageError(
                field=field_option(fields),
                problem=f"{path}: column {name!r} holds {kind}, not text",
                fix=f"name the column that holds the text: {field_option(fields)} ...",
            )
    for batch in table.iter_batches(columns=list(fields)):
        rows = zip(*(batch.column(i).to_pylist() for i in range(len(fields))), strict=True)
        yield from (r for r in rows if all(isinstance(t, str) for t in r))
