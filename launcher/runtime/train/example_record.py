"""`--record_examples`: which examples each train step got, as MaxText's own data path handed
them to it, written per host and per start to `<run>/examples/`. With it a restart can be
audited: every step's batch after a resume, and no example read twice in an epoch (the e2e
tests of a killed host and of a preemption read it back).

The record is taken where MaxText's train loop takes its batch (DataLoader's
load_next_batch_pre_sharding, once a step): the host's own rows of the global batch, each packed
row split into its documents by `inputs_segmentation`, each document kept as a hash of its
tokens (16 hex digits)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from launcher.runtime.borrowed.maxtext import LOAD_BATCH, MAXTEXT

RECORD_SUBDIR = "examples"


def record_path(run_dir: Path, started_ns: int, rank: int) -> Path:
    return run_dir / RECORD_SUBDIR / f"{started_ns}-host{rank}.jsonl"


def example_hashes(inputs: Any, segmentation: Any) -> list[str]:
    """One hash per document of each row (rows: a 2-D array of token ids; segmentation: the
    same shape, 0 for padding, 1..k for the row's k documents)."""
    import numpy as np

    inputs, segmentation = np.asarray(inputs), np.asarray(segmentation)
    found = []
    for row, segments in zip(inputs, segmentation, strict=True):
        for segment in np.unique(segments[segments > 0]):
            tokens = row[segments == segment].astype(np.int64).tobytes()
            found.append(hashlib.sha256(tokens).hexdigest()[:16])
    return found


def _local_rows(array: Any) -> Any:
    """This host's rows of a global jax array (its addressable shards, in row order, each row
    once: a shard replicated on two local devices is the same rows)."""
    import numpy as np

    if not hasattr(array, "addressable_shards"):
        return np.asarray(array)
    by_start: dict[int, Any] = {}
    for shard in array.addressable_shards:
        start = shard.index[0].start or 0
        by_start.setdefault(start, np.asarray(shard.data))
    return np.concatenate([by_start[s] for s in sorted(by_start)])


class ExampleRecorder:
    """Appends one line a step: {"step": s, "examples": [hash, ...]}."""

    def __init__(self, path: Path, first_step: int) -> None:
        self.path = path
        self.step = first_step
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a")  # noqa: SIM115  (open for the life of the start)

    def record(self, batch: dict[str, Any]) -> None:
        inputs = _local_rows(batch["inputs"])
        segments = batch.get("inputs_segmentation")
        segmentation = _local_rows(segments) if segments is not None else (inputs != 0)
        line = {"step": self.step, "examples": example_hashes(inputs, segmentation)}
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()  # a killed host keeps what it recorded
        self.step += 1

    def close(self) -> None:
        self._file.close()


def install(recorder: ExampleRecorder) -> None:
    """Records every batch MaxText's train loop loads (not eval's: it has its own iterator)."""

    def recording(original):
        def load_and_record(self):
            batch = original(self)
            recorder.record(batch)
            return batch

        return load_and_record

    MAXTEXT.patch(*LOAD_BATCH, recording)


def read_records(directory: Path) -> Iterator[tuple[str, int, dict[int, list[str]]]]:
    """(start, host, {step: hashes}) for each file, oldest start first."""
    for path in sorted(directory.glob("*-host*.jsonl"), key=lambda p: int(p.name.split("-")[0])):
        start, host = path.stem.split("-host")
        steps = {}
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                steps[int(entry["step"])] = entry["examples"]
        yield start, int(host), steps
