"""The cluster's `data prepare` (launcher.runtime.data.prepare) applies the workstation's
rules: its steps run here in process, without Ray (a scan per file, the driver's index, a write
per shard), and give byte for byte the shards `prepare` writes for the same corpus, with its
duplicates, empty documents, near duplicates, blank and CRLF lines, Parquet and text files. Ray
itself runs them in tests/e2e/test_data_prepare_on_ray.py. Also: MinHash's rule one document at
a time and all at once, and the request's way to the job."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from launcher.client.data.on_cluster import entrypoint
from launcher.client.data.prepare import prepare
from launcher.core.data.datasets import DATASETS_SUBDIR, SPLITS
from launcher.core.data.near_duplicates import NearDuplicates, band_keys, near_duplicate_mask
from launcher.core.data.shards import PrepareRequest, file_sha256, tokenizer_of
from launcher.core.data.sources import LocalFile, digest_of, input_files, source_digest
from launcher.runtime.data.prepare import (
    Scan,
    ShardPlan,
    _line_offsets,
    build_index,
    scan_file,
    write_planned_shard,
)

pytestmark = pytest.mark.unit

WORDS = [f"w{i}" for i in range(60)]


def _doc(rng: random.Random, words: int = 120) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


@pytest.fixture
def corpus(tmp_path) -> Path:
    """Three files of each kind's edge cases: exact duplicates across files, near duplicates
    (one word changed of 120), empty documents, blank lines, CRLF line ends, Parquet, text."""
    rng = random.Random(7)
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    docs = [_doc(rng) for _ in range(300)]
    near = [" ".join([*d.split()[:60], "CHANGED", *d.split()[61:]]) for d in docs[:20]]
    lines = [json.dumps({"text": d}) for d in docs[:150] + near[:10]]
    lines[40:40] = ["", "   ", json.dumps({"text": "  "})]  # blank lines and an empty document
    (src / "a.jsonl").write_text("\n".join(lines) + "\n")
    crlf = [json.dumps({"text": d}) for d in docs[150:220] + docs[:5] + near[10:]]
    (src / "b.jsonl").write_bytes(("\r\n".join(crlf) + "\r\n").encode())
    pq.write_table(pa.table({"text": docs[220:300] + docs[100:103]}), src / "sub" / "c.parquet")
    (src / "sub" / "d.txt").write_text("a whole text file is one document")
    return src


def _on_ray_steps(request: PrepareRequest, out: Path) -> dict[str, str]:
    """The job's three steps, without Ray: each shard's sha256 by name."""
    files = input_files(str(request.source))
    from launcher.core.data.near_duplicates import bands_for

    bands = bands_for(request.near_duplicates)[0] if request.near_duplicates else 0
    scans = []
    for i, file in enumerate(files):
        row = scan_file(
            file,
            request.fields,
            request.split_seed,
            request.eval_fraction,
            request.near_duplicates,
        )
        scans.append(Scan.of({"file": i, **row}, bands))
    assert digest_of([(f.name, s.sha256) for f, s in zip(files, scans, strict=True)]) == (
        source_digest(files)
    )
    index = build_index(scans, request)
    starts = {f: at >= 0 for plan in index.plans for f, at in plan.starts.items()}
    assert starts == {0: True, 1: False, 2: False, 3: False}, (
        "a.jsonl is read from its documents' lines; b.jsonl's CRLF lines, Parquet and text whole"
    )
    out.mkdir(parents=True)
    tokenizer, kind = tokenizer_of(request)
    found = {}
    for plan in index.plans:
        plan = ShardPlan.of_row(plan.to_row())  # as the write task receives it
        record = write_planned_shard(plan, files, request, str(out), tokenizer, kind)
        assert record["sha256"] == file_sha256(out / plan.name)
        found[plan.name] = record["sha256"]
    return found


@pytest.mark.parametrize(
    ("shard_mb", "near"), [(64, None), (0.004, None), (0.004, 0.8)], ids=["one", "many", "near"]
)
def test_the_cluster_steps_write_the_workstation_shards(corpus, tmp_path, shard_mb, near):
    request = PrepareRequest(
        corpus, "d", tmp_path / "local", shard_mb=shard_mb, progress=False, near_duplicates=near
    )
    manifest = prepare(request)
    local = tmp_path / "local" / DATASETS_SUBDIR / "d"
    shards = [n for s in SPLITS for n in getattr(manifest, s).shards]
    assert len(shards) > (3 if shard_mb < 1 else 1)
    on_ray = _on_ray_steps(request, tmp_path / "ray")
    assert list(on_ray) == shards
    assert on_ray == {n: file_sha256(local / n) for n in shards}
    assert manifest.duplicates_dropped == 5 + 3  # docs[:5] again in b, docs[100:103] in c
    assert manifest.empty_dropped == 1
    assert manifest.near_duplicates_dropped == (20 if near else 0)


def test_a_corpus_of_one_document_per_split_rule_still_gets_an_eval_split(tmp_path):
    src = tmp_path / "two.jsonl"
    src.write_text('{"text": "one"}\n{"text": "two"}\n')
    request = PrepareRequest(src, "d", tmp_path / "local", eval_fraction=1e-9, progress=False)
    manifest = prepare(request)
    assert (manifest.train.examples, manifest.eval.examples) == (1, 1)
    on_ray = _on_ray_steps_single(request, tmp_path / "ray")
    assert on_ray == [manifest.train.shards[0], manifest.eval.shards[0]]


def _on_ray_steps_single(request: PrepareRequest, out: Path) -> list[str]:
    files = input_files(str(request.source))
    scans = [Scan.of({"file": 0, **scan_file(files[0], ("text",), 0, 1e-9, None)}, 0)]
    return [p.name for p in build_index(scans, request).plans]


def test_line_offsets_count_documents_as_the_jsonl_reader_does():
    data = b'{"text": "a"}\n\n  \n{"text": "b"}\n{"text": "c"}'
    starts = [0, data.index(b'{"text": "b"}'), data.index(b'{"text": "c"}')]
    assert _line_offsets(data).tolist() == starts
    assert _line_offsets(b'{"text": "a"}\r\n{"text": "b"}') is None  # the text reader's lines


def test_the_digest_names_files_by_their_path_under_the_source(corpus):
    files = input_files(corpus)
    assert [f.name for f in files] == ["a.jsonl", "b.jsonl", "sub/c.parquet", "sub/d.txt"]
    moved = input_files(corpus.rename(corpus.with_name("elsewhere")))
    assert source_digest(moved) == source_digest([LocalFile(f.path, f.root) for f in moved])


def test_minhash_drops_a_near_copy_and_keeps_a_different_text():
    rng = random.Random(1)
    text = _doc(rng, 300)
    words = text.split()
    one_word = " ".join([*words[:150], "CHANGED", *words[151:]])  # Jaccard about 0.97
    half = " ".join(words[:150] + _doc(rng, 150).split())  # about 0.33
    rule = NearDuplicates(0.8)
    assert [rule.seen(t) for t in (text, one_word, half, _doc(rng, 300))] == [
        False,
        True,
        False,
        False,
    ]


def test_minhash_all_at_once_is_the_rule_one_after_another():
    rng = random.Random(3)
    base = [_doc(rng, 80) for _ in range(40)]
    texts = base + [" ".join([*t.split()[:-1], "END"]) for t in base[::3]] + base[5:8]
    rng.shuffle(texts)
    rule = NearDuplicates(0.7)
    one_by_one = [rule.seen(t) for t in texts]
    at_once = near_duplicate_mask(np.stack([band_keys(t, 0.7) for t in texts]))
    assert at_once.tolist() == one_by_one
    assert 14 + 3 >= sum(one_by_one) >= 14


def test_the_request_reaches_the_job_as_one_argument_and_back(tmp_path):
    request = PrepareRequest(
        "gs://b/corpus dir/$(rm -rf ~);x", "d", "gs://b", fields=("prompt", "completion")
    )
    words = entrypoint(request, 4, True)
    assert words[words.index("--request") + 1] == request.to_json()
    assert words[-3:] == ["--parallelism", "4", "--on-tpu-hosts"]
    assert PrepareRequest.from_json(request.to_json()) == request


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["gs://b/raw"], "read where it is by the cluster's hosts"),
        (["--parallelism", "4"], "is for a preparation on a cluster's hosts"),
        (["--on-tpu-hosts"], "add --release NAME"),
        (["--address", "http://127.0.0.1:1"], "--output-dir"),
    ],
)
def test_what_only_a_cluster_does_is_refused_here_with_the_fix(argv, said, capsys):
    from launcher.cli import main

    assert main(["data", "prepare", "--name", "d", *argv]) == 2  # before anything is read
    assert said in capsys.readouterr().err


def test_a_release_reads_the_bucket_or_its_mount_never_this_machine():
    from launcher.client.data.on_cluster import _check_source_is_theirs
    from launcher.core.errors import UsageError

    _check_source_is_theirs("gs://b/raw", "/data", "tpu")
    _check_source_is_theirs("/data/raw/corpus", "/data", "tpu")
    with pytest.raises(
        UsageError, match=re.escape("gcloud storage cp -r ./corpus gs://BUCKET/raw/")
    ):
        _check_source_is_theirs("./corpus", "/data", "tpu")
    with pytest.raises(UsageError, match="their bucket mount, /data"):
        _check_source_is_theirs("/database/x", "/data", "tpu")


def test_objects_are_read_in_the_order_a_directory_files_are(tmp_path):
    """pathlib sorts by path part: a/b.jsonl before a-c.jsonl, though '-' sorts before '/'."""
    from launcher.core.data.sources import _path_parts

    names = ["raw/a-c.jsonl", "raw/a/b.jsonl", "raw/a.jsonl", "raw/B.txt"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    here = [f.name for f in input_files(tmp_path / "raw")]
    assert [n.removeprefix("raw/") for n in sorted(names, key=_path_parts)] == here
    assert here == ["B.txt", "a/b.jsonl", "a-c.jsonl", "a.jsonl"]
