"""The tokenizers `data prepare` counts with where MaxText is not installed (the data extra on a
laptop: launcher.core.data.maxtext_tokenizers) give MaxText's own ids: a sentencepiece model and a
tiktoken file made here from the project's corpus, loaded once through MaxText's
build_tokenizer and once through load_tokenizer as it runs without MaxText, on the corpus,
special tokens' text, a whitespace run past tiktoken's limit and non-Latin text, with and
without BOS and EOS."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.core.data import tokenizers
from launcher.core.data.tokenizers import load_tokenizer
from launcher.core.errors import UsageError
from launcher.corpus.generate import documents
from tests.support.tokenizer_files import sentencepiece_model, tiktoken_file

pytestmark = pytest.mark.unit

TEXTS = [
    *documents()[:40],
    "<|begin_of_text|>as text, <|eot_id|> too",  # special tokens' text is not special
    "a" + " " * 30_000 + "b",  # runs past MaxText's 25,000-character limit for tiktoken,
    "x" + "th" * 15_000,  # cut inside a merged pair ("th")
    "Grüße, 東京 — ½ café\n\n\tend",
]


@pytest.fixture(scope="module")
def tokenizer_files(tmp_path_factory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("tokenizers")
    return {"sentencepiece": sentencepiece_model(where), "tiktoken": tiktoken_file(where)}


@pytest.mark.parametrize("kind", ["sentencepiece", "tiktoken"])
@pytest.mark.parametrize(("bos", "eos"), [(True, True), (False, False)])
def test_without_maxtext_a_tokenizer_file_gives_maxtexts_ids(
    tokenizer_files, monkeypatch, kind, bos, eos
):
    from maxtext.input_pipeline.tokenizer import build_tokenizer

    path = str(tokenizer_files[kind])
    theirs = build_tokenizer(path, kind, bos, eos, None)
    real_find_spec = tokenizers.find_spec
    monkeypatch.setattr(
        tokenizers, "find_spec", lambda name: None if name == "maxtext" else real_find_spec(name)
    )
    ours = load_tokenizer(path, kind, add_bos=bos, add_eos=eos)
    assert type(ours.impl).__module__ == "launcher.core.data.maxtext_tokenizers"
    assert ours.vocab_size == tokenizers.vocabulary_size(theirs)
    for text in TEXTS:
        assert ours.encode(text) == theirs.encode(text), text[:60]
    assert (ours.encode("x")[0] == theirs.bos_id) is bos


def test_without_maxtext_a_tokenizer_asset_by_name_says_where_to_get_it(monkeypatch):
    monkeypatch.setattr(tokenizers, "maxtext_tokenizer_assets", lambda: None)
    monkeypatch.setattr(tokenizers, "find_spec", lambda name: None)
    with pytest.raises(UsageError) as e:
        load_tokenizer("tokenizer.llama2", "sentencepiece")
    assert "come with MaxText" in e.value.problem and "assets/tokenizers" in e.value.fix
    with pytest.raises(UsageError) as e:
        load_tokenizer("gs://b/tok.model", "sentencepiece")
    assert "bucket" in e.value.problem and "gcloud storage cp" in e.value.fix
