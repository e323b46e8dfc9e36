"""A prepared dataset, named in one place: what `tpu-launcher data prepare` writes under
`<output dir>/datasets/<name>/`, what a job's `--data NAME` turns into MaxText's own keys, and
what the plan and the checks read back.

    <output dir>/datasets/<name>/
      manifest.json                   written last: the dataset is complete when it exists
      train-00000-of-00004.array_record ...
      eval-00000-of-00001.array_record
      tokenizer/                      the tokenizer the tokens were counted with (the job's)

Shards are ArrayRecord files of `tf.train.Example` records with one bytes feature, `text`: what
MaxText's Grain pipeline reads with `grain_file_type=arrayrecord` and tokenizes as it trains. An
instruction set's records have one feature per field (prompt and completion): what its SFT
pipeline reads as train_data_columns.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from launcher.core.errors import UsageError

DATASETS_SUBDIR = "datasets"
MANIFEST = "manifest.json"
TOKENIZER_SUBDIR = "tokenizer"
SPLITS = ("train", "eval")
SHARD_SUFFIX = ".array_record"
TEXT_FEATURE = "text"  # MaxText's train_data_columns / eval_data_columns default
MANIFEST_VERSION = 1


# A name becomes a directory on the bucket and part of MaxText's grain_train_files, whose ';' and
# ',' separate a mixture's files and weights and whose '*' is a glob: letters, digits, '.', '_',
# '-', starting with a letter or digit (also a valid Cloud Storage object name part).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def check_dataset_name(name: str, field: str = "--name") -> None:
    if not _NAME.match(name):
        raise UsageError(
            field=field,
            problem=f"{name!r} is not a dataset name (letters, digits, '.', '_', '-'; at most "
            "100; first a letter or digit)",
            fix="e.g. --name my-corpus-v1",
        )


def shard_name(split: str, index: int, count: int) -> str:
    return f"{split}-{index:05d}-of-{count:05d}{SHARD_SUFFIX}"


@dataclass(frozen=True)
class SplitStats:
    examples: int
    tokens: int  # as the tokenizer counts them, bos/eos included as MaxText adds them
    shards: list[str] = field(default_factory=list)
    longest: int = 0  # tokens of the longest example
    # The examples' lengths in powers of two: bits of a length (its bucket) -> [examples,
    # tokens]; what a job truncating them to its sequence length reads ({}: not recorded).
    lengths: dict[str, list[int]] = field(default_factory=dict)

    def tokens_truncated_at_least(self, length: int) -> int | None:
        """The split's tokens once each example is cut to `length` (MaxText truncates before it
        packs), at least: exact for the buckets wholly under or over it, bounded for the one it
        falls in. None where the lengths were not recorded."""
        if not self.lengths:
            return None
        total = 0
        for bits, (count, tokens) in self.lengths.items():
            low, high = (1 << int(bits)) >> 1, (1 << int(bits)) - 1  # bucket's shortest, longest
            if high <= length:
                total += tokens
            elif low >= length:
                total += count * length
            else:
                total += max(count * low, tokens - count * (high - length))
        return total


def length_histogram(lengths: list[int]) -> dict[str, list[int]]:
    """SplitStats.lengths of some examples' token counts."""
    found: dict[str, list[int]] = {}
    for n in lengths:
        bucket = found.setdefault(str(n.bit_length()), [0, 0])
        bucket[0] += 1
        bucket[1] += n
    return found


def merge_histograms(parts: list[dict[str, list[int]]]) -> dict[str, list[int]]:
    merged: dict[str, list[int]] = {}
    for part in parts:
        for bits, (count, tokens) in part.items():
            bucket = merged.setdefault(bits, [0, 0])
            bucket[0] += count
            bucket[1] += tokens
    return dict(sorted(merged.items(), key=lambda kv: int(kv[0])))


@dataclass(frozen=True)
class Manifest:
    name: str
    source: str  # the input as given
    source_sha256: str  # of the input files' names and sha256s, in order: a changed input is new
    tokenizer: str  # as given: a path or one of MaxText's tokenizer assets
    tokenizer_type: str  # MaxText's tokenizer_type: sentencepiece, huggingface, tiktoken
    tokenizer_path: str  # the dataset's copy, relative to its directory: the job's tokenizer_path
    vocab_size: int
    eval_fraction: float
    split_seed: int
    train: SplitStats
    eval: SplitStats
    duplicates_dropped: int = 0
    empty_dropped: int = 0
    checksum: str = ""  # sha256 of the shards' bytes, train then eval, in name order
    fields: list[str] = field(default_factory=lambda: [TEXT_FEATURE])  # each record's features
    version: int = MANIFEST_VERSION
    near_duplicates_dropped: int = 0
    near_duplicate_threshold: float | None = None  # MinHash's Jaccard threshold; None: not asked

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        raw: dict[str, Any] = json.loads(text)
        raw["train"] = SplitStats(**raw["train"])
        raw["eval"] = SplitStats(**raw["eval"])
        return cls(**raw)


def describe_manifest(manifest: Manifest, where: object) -> str:
    """What `data prepare` and `data show` print of a dataset."""
    t, e = manifest.train, manifest.eval
    return (
        f"dataset {manifest.name}: {where}\n"
        f"  source     {manifest.source} (sha256 {manifest.source_sha256[:12]})\n"
        f"  tokenizer  {manifest.tokenizer} ({manifest.tokenizer_type}, "
        f"vocabulary {manifest.vocab_size})\n"
        f"  train      {t.examples} examples, {t.tokens} tokens, {len(t.shards)} shard(s)\n"
        f"  eval       {e.examples} examples, {e.tokens} tokens, {len(e.shards)} shard(s) "
        f"({manifest.eval_fraction:g} of the documents, seed {manifest.split_seed})\n"
        f"  dropped    {manifest.duplicates_dropped} exact duplicates, "
        f"{manifest.empty_dropped} empty"
        + (
            f", {manifest.near_duplicates_dropped} near duplicates (MinHash, Jaccard "
            f"{manifest.near_duplicate_threshold:g})"
            if manifest.near_duplicate_threshold
            else ""
        )
        + "\n"
        f"  checksum   {manifest.checksum[:16]}"
    )


def dataset_dir(output_dir: str, name: str) -> str:
    # Joined as text: in the cluster it is the bucket's mount, from a workstation it may be gs://.
    return f"{output_dir.rstrip('/')}/{DATASETS_SUBDIR}/{name}"


def work_dir(target: Path) -> Path:
    """Where `data prepare` makes a dataset until its manifest is written: beside it, hidden, so
    a prepare cut short leaves nothing that looks like a dataset (the next run resumes there)."""
    return target.with_name(f".{target.name}.preparing")


def read_manifest(directory: Path, where: str) -> Manifest:
    """The manifest of a prepared dataset; a UsageError names what is missing and the fix."""
    path = directory / MANIFEST
    if not path.is_file():
        partial = work_dir(directory).is_dir()
        raise UsageError(
            field="--data",
            problem=f"no prepared dataset at {directory} ({where})"
            + ("; a `data prepare` into it did not finish" if partial else ""),
            fix="run `tpu-launcher data prepare SOURCE --name NAME` (again: it resumes), or name "
            "MaxText's own keys (dataset_type=grain grain_train_files=...)",
        )
    try:
        return Manifest.from_json(path.read_text())
    except (ValueError, TypeError, KeyError) as e:
        raise UsageError(
            field="--data",
            problem=f"{path} is not a manifest this launcher wrote ({e})",
            fix="prepare the dataset again with `tpu-launcher data prepare`",
        ) from None


def maxtext_keys(manifest: Manifest, directory: str) -> dict[str, str]:
    """MaxText's own keys for a prepared dataset in `directory` (as the job's hosts see it)."""
    keys = {
        "dataset_type": "grain",
        "grain_file_type": "arrayrecord",
        "grain_train_files": f"{directory}/train-*{SHARD_SUFFIX}",
        "tokenizer_path": f"{directory}/{manifest.tokenizer_path}",
        "tokenizer_type": manifest.tokenizer_type,
    }
    if manifest.eval.examples:
        keys["grain_eval_files"] = f"{directory}/eval-*{SHARD_SUFFIX}"
    if manifest.fields != [TEXT_FEATURE]:  # MaxText's default columns are ['text']
        columns = "[" + ",".join(f"'{f}'" for f in manifest.fields) + "]"
        keys |= {"train_data_columns": columns, "eval_data_columns": columns}
    return keys


@dataclass(frozen=True)
class EpochEstimate:
    """How far `steps` x the global batch goes through a split."""

    rows: int  # sequences the job reads: steps x global batch
    row_tokens: int  # their capacity: rows x max_target_length
    examples: int
    tokens: int  # the split's, each example cut to the sequence length where known
    packing: bool

    @property
    def epochs(self) -> float:
        """With packing, the capacity over the split's tokens as the job reads them (an upper
        bound: a packed row can end in padding); without it, one example a row."""
        if self.packing:
            return self.row_tokens / self.tokens if self.tokens else math.inf
        return self.rows / self.examples if self.examples else math.inf

    @property
    def surely_more_than(self) -> float:
        """Epochs the job reads at least: a row holds at least one example (truncated to the
        sequence length), so rows / examples is a floor with and without packing."""
        return self.rows / self.examples if self.examples else math.inf


def epoch_estimate(
    split: SplitStats, steps: int, global_batch: int, max_target_length: int, packing: bool
) -> EpochEstimate:
    rows = steps * global_batch
    truncated = split.tokens_truncated_at_least(max_target_length)
    tokens = split.tokens if truncated is None else min(split.tokens, truncated)
    return EpochEstimate(rows, rows * max_target_length, split.examples, tokens, packing)
