"""A corpus's files as `data prepare` reads them: which files are documents (.txt/.md: one a
file; JSONL: one a line; Parquet: one a row), each document's fields' text, and a digest of the
whole input (a changed input is a new dataset). Bad input is named with its file and line."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from launcher.core.errors import UsageError

TEXT_SUFFIXES = (".txt", ".md")
JSONL_SUFFIXES = (".jsonl", ".json")
PARQUET_SUFFIXES = (".parquet",)
SUFFIXES = TEXT_SUFFIXES + JSONL_SUFFIXES + PARQUET_SUFFIXES


def input_files(source: Path) -> list[Path]:
    if not source.exists():
        raise UsageError(
            field="SOURCE",
            problem=f"{source} does not exist",
            fix="give a file or a directory of .txt/.md, .jsonl or .parquet files",
        )
    files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
    found = [p for p in files if p.suffix in SUFFIXES and not p.name.startswith(".")]
    if not found:
        raise UsageError(
            field="SOURCE",
            problem=f"no .txt, .md, .jsonl or .parquet file in {source}",
            fix="point at the corpus's directory; other files are not read",
        )
    return found


def source_digest(files: list[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root) if path != root else path.name).encode() + b"\0")
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


def documents(path: Path, fields: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The documents of one file, each its fields' text: a .txt/.md file is one, a JSONL line
    one, a Parquet row one."""
    try:
        if path.suffix in TEXT_SUFFIXES and len(fields) == 1:
            yield (path.read_text(encoding="utf-8"),)
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


def _jsonl(path: Path, fields: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
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


def _parquet(path: Path, fields: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
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
