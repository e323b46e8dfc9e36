"""`tpu-launcher data prepare`: a corpus into ArrayRecord shards MaxText's Grain pipeline reads
(read back here with ArrayRecord's reader and MaxText's own Example proto), a manifest written
last, a second run skipped, a run cut short resumed, and every unreadable input named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from launcher.client.data.prepare import STATE, PrepareRequest, prepare
from launcher.core.data import shards as dataset_shards
from launcher.core.data.datasets import MANIFEST, Manifest, maxtext_keys, read_manifest, work_dir
from launcher.core.errors import UsageError
from launcher.corpus import generate

pytestmark = pytest.mark.unit


def _texts(shard: Path) -> list[str]:
    from array_record.python.array_record_module import ArrayRecordReader
    from maxtext.input_pipeline.protos import example_pb2

    reader = ArrayRecordReader(str(shard))
    texts = []
    for i in range(reader.num_records()):
        example = example_pb2.Example()
        example.ParseFromString(reader.read([i])[0])
        texts.append(example.features.feature["text"].bytes_list.value[0].decode())
    reader.close()
    return texts


@pytest.fixture
def corpus(tmp_path) -> Path:
    """Each input kind once: JSONL (with a duplicate and an empty line), text, Parquet."""
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    lines = [{"text": f"document {i}: {'word ' * (i % 7)}"} for i in range(200)]
    lines.append({"text": "document 3: word word word "})  # a duplicate of line 3
    lines.append({"text": "   "})  # empty
    (src / "a.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (src / "sub" / "b.txt").write_text("a whole text file is one document")
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(50)]}), src / "c.parquet")
    (src / "notes.csv").write_text("not read")
    return src


def _request(src: Path, out: Path, **kw) -> PrepareRequest:
    return PrepareRequest(src, "mine", out, progress=False, **kw)


def test_the_shipped_corpus_is_what_its_generator_writes():
    for name, text in generate.files().items():
        assert (generate.CORPUS_DIR / name).read_text() == text, f"run {generate.__name__}"


def test_writes_shards_grain_reads_a_split_and_a_manifest(corpus, tmp_path):
    m = prepare(_request(corpus, tmp_path / "bucket"))
    where = tmp_path / "bucket" / "datasets" / "mine"
    train = [t for s in m.train.shards for t in _texts(where / s)]
    held = [t for s in m.eval.shards for t in _texts(where / s)]
    assert len(train) + len(held) == 200 + 1 + 50  # the duplicate and the empty one dropped
    assert (m.duplicates_dropped, m.empty_dropped) == (1, 1)
    assert not set(train) & set(held) and held, "the eval split is held out"
    assert (m.train.examples, m.eval.examples) == (len(train), len(held))
    assert m.train.tokens == sum(len(t.encode()) for t in train)  # the byte tokenizer
    assert (m.tokenizer_type, m.vocab_size) == ("huggingface", 256)
    assert read_manifest(where, "test") == m
    keys = maxtext_keys(m, "/data/datasets/mine")
    assert keys["grain_train_files"] == "/data/datasets/mine/train-*.array_record"
    assert keys["tokenizer_path"] == "/data/datasets/mine/tokenizer"
    assert not (where / STATE).exists()
    # Same text, same split, on every run and machine.
    again = prepare(_request(corpus, tmp_path / "other"))
    assert again.checksum == m.checksum


def test_a_second_run_skips_a_dataset_already_prepared(corpus, tmp_path, capsys):
    first = prepare(_request(corpus, tmp_path))
    shard = tmp_path / "datasets" / "mine" / first.train.shards[0]
    before = shard.stat().st_mtime_ns
    assert prepare(_request(corpus, tmp_path)) == first
    assert shard.stat().st_mtime_ns == before
    assert "already prepared" in capsys.readouterr().err
    with pytest.raises(UsageError, match="another source or with other settings"):
        prepare(_request(corpus, tmp_path, eval_fraction=0.2))
    replaced = prepare(_request(corpus, tmp_path, eval_fraction=0.2, overwrite=True))
    assert replaced.eval.examples > first.eval.examples


def test_a_run_cut_short_resumes_and_leaves_nothing_that_looks_complete(
    corpus, tmp_path, monkeypatch
):
    small = {"shard_mb": 0.001}  # about 1 kB of text a shard: several shards
    whole = prepare(_request(corpus, tmp_path / "whole", **small))
    assert len(whole.train.shards) > 3
    written = []
    real_write = dataset_shards.write_shard

    def write_two_then_die(path, texts, features):
        if len(written) == 2:
            raise KeyboardInterrupt  # ^C, or the machine going away
        real_write(path, texts, features)
        written.append(path)

    monkeypatch.setattr(dataset_shards, "write_shard", write_two_then_die)
    out = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        prepare(_request(corpus, out, **small))
    where = out / "datasets" / "mine"
    assert not where.exists()  # nothing that looks like a dataset; the work kept beside it
    assert [p.parent for p in written] == [work_dir(where)] * 2
    with pytest.raises(UsageError, match="did not finish"):
        read_manifest(where, "test")
    kept = {p.name: p.stat().st_mtime_ns for p in written}
    monkeypatch.setattr(dataset_shards, "write_shard", real_write)
    resumed = prepare(_request(corpus, out, **small))
    again = {name: (where / name).stat().st_mtime_ns for name in kept}
    assert again == kept, "finished shards written again"
    assert resumed.checksum == whole.checksum
    assert not work_dir(where).exists()


@pytest.mark.parametrize(
    ("files", "field", "says"),
    [
        ({}, "SOURCE", "no .txt, .md, .jsonl or .parquet file"),
        ({"a.jsonl": '{"text": "ok"}\n{not json\n'}, "SOURCE", "a.jsonl:2 is not JSON"),
        ({"a.jsonl": '{"body": "x"}\n'}, "--text-field", "a.jsonl:1 has no field 'text'"),
        ({"a.jsonl": '{"text": 42}\n'}, "--text-field", "a.jsonl:1: field 'text' holds a int"),
        ({"a.jsonl": '{"text": ""}\n'}, "SOURCE", "holds no text"),
        ({"a.txt": b"\xff\xfe bad"}, "SOURCE", "cannot be read as text"),
        ({"a.parquet": "not parquet"}, "SOURCE", "is not a Parquet file"),
        ({"a.parquet": pa.table({"text": [1, 2]})}, "--text-field", "column 'text' holds int64"),
    ],
)
def test_unreadable_or_empty_input_is_named_with_the_fix(tmp_path, files, field, says):
    src = tmp_path / "src"
    src.mkdir()
    for name, content in files.items():
        path = src / name
        if isinstance(content, pa.Table):
            pq.write_table(content, path)
        else:
            path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    with pytest.raises(UsageError) as err:
        prepare(_request(src, tmp_path / "out"))
    assert err.value.field == field and says in str(err.value), str(err.value)
    datasets = tmp_path / "out" / "datasets"
    # Nothing left behind: no dataset, no half-made one (the tokenizer copied, no shard).
    assert not datasets.exists() or not any(datasets.iterdir()), list(datasets.iterdir())


def test_a_missing_source_or_tokenizer_is_named(tmp_path, corpus):
    with pytest.raises(UsageError, match="does not exist"):
        prepare(_request(tmp_path / "nope", tmp_path))
    with pytest.raises(UsageError) as err:
        prepare(_request(corpus, tmp_path, tokenizer="no-such-tokenizer.model"))
    assert err.value.field == "--tokenizer" and "not found" in str(err.value)


def test_a_maxtext_tokenizer_asset_counts_with_maxtexts_own_tokenizer(corpus, tmp_path):
    m = prepare(_request(corpus, tmp_path, tokenizer="tokenizer.llama2"))
    assert (m.tokenizer_type, m.vocab_size) == ("sentencepiece", 32000)
    assert m.tokenizer_path == "tokenizer/tokenizer.llama2"
    assert (tmp_path / "datasets" / "mine" / m.tokenizer_path).is_file()
    where = tmp_path / "datasets" / "mine"
    text_bytes = sum(len(t.encode()) for s in m.train.shards for t in _texts(where / s))
    # Subwords, with MaxText's BOS and EOS on each example: fewer than bytes, more than 2 each.
    assert 2 * m.train.examples < m.train.tokens < text_bytes


def test_the_cli_prepares_the_shipped_corpus_and_shows_it(tmp_path):
    from launcher.cli import main

    assert main(["data", "prepare", "--name", "tiny", "--output-dir", str(tmp_path)]) == 0
    assert main(["data", "show", "tiny", "--output-dir", str(tmp_path)]) == 0
    m = Manifest.from_json((tmp_path / "datasets" / "tiny" / MANIFEST).read_text())
    assert m.train.examples + m.eval.examples == generate.DOCUMENTS
    assert main(["data", "prepare", "--name", "a;b", "--output-dir", str(tmp_path)]) == 2
    assert os.listdir(tmp_path / "datasets") == ["tiny"]


@pytest.mark.parametrize(
    ("doc", "features"),
    [
        (("hello",), ("text",)),
        (("ünïcode ✓ " * 500,), ("text",)),  # lengths past one varint byte
        (("",), ("text",)),
        (("a prompt", "a completion"), ("prompt", "completion")),
        (("q" * 200, ""), ("question", "answer")),
    ],
)
def test_the_records_are_the_bytes_protobuf_writes(doc, features):
    """The records `data prepare` writes without protobuf or MaxText are the bytes MaxText's own
    generated Example class writes (deterministic: map entries in key order) and parses back."""
    from maxtext.input_pipeline.protos import example_pb2

    from launcher.core.data.example_records import example_bytes

    made = example_pb2.Example()
    for name, text in zip(features, doc, strict=True):
        made.features.feature[name].bytes_list.value.append(text.encode())
    assert example_bytes(doc, features) == made.SerializeToString(deterministic=True)
    parsed = example_pb2.Example()
    parsed.ParseFromString(example_bytes(doc, features))
    assert {n: parsed.features.feature[n].bytes_list.value[0].decode() for n in features} == dict(
        zip(features, doc, strict=True)
    )
