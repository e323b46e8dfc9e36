"""`export`'s pieces that need no checkpoint: the model sizes read from MaxText's config,
what is refused, the byte tokenizer, and the tensor conversion's invariants. That the exported
model computes what MaxText computes is the e2e test's (tests/e2e/test_generate_e2e.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from tokenizers import Tokenizer

from launcher.core.data.byte_tokenizer import byte_tokenizer_files
from launcher.core.errors import UsageError
from launcher.runtime.models.hf_export import ModelShape, to_hf_tensors

pytestmark = pytest.mark.unit

TINY = dict(
    vocab_size=256, emb_dim=64, mlp_dim=128, num_decoder_layers=2, num_query_heads=4,
    num_kv_heads=2, head_dim=16, normalization_layer_epsilon=1e-5, rope_max_timescale=10_000,
    max_target_length=128, logits_via_embedding=False, scan_layers=True, param_scan_axis=1,
    decoder_block=SimpleNamespace(value="llama2"), rope_type=SimpleNamespace(value="default"),
)  # fmt: skip


TINY_HF = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
}  # fmt: skip


def _shape(**changes) -> ModelShape:
    return ModelShape.from_maxtext(SimpleNamespace(**{**TINY, **changes}))


def _scanned_params(rng: np.random.Generator) -> dict:
    """Random parameters in MaxText's layout for the tiny model, layers stacked on axis 1."""
    e, m, h, kv, d, n, v = 64, 128, 4, 2, 16, 2, 256
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    layers = {
        "mlp": {"wi_0": {"kernel": r(e, n, m)}, "wi_1": {"kernel": r(e, n, m)},
                "wo": {"kernel": r(m, n, e)}},
        "pre_self_attention_layer_norm": {"scale": r(e, n)},
        "post_self_attention_layer_norm": {"scale": r(e, n)},
        "self_attention": {"query": {"kernel": r(e, n, h, d)}, "key": {"kernel": r(e, n, kv, d)},
                           "value": {"kernel": r(e, n, kv, d)}, "out": {"kernel": r(h, n, d, e)}},
    }  # fmt: skip
    decoder = {"layers": layers, "decoder_norm": {"scale": r(e)}}
    decoder["logits_dense"] = {"kernel": r(e, v)}
    return {"params": {"decoder": decoder, "token_embedder": {"embedding": r(v, e)}}}


def _unscanned(params: dict) -> dict:
    """The same parameters as MaxText lays them out with scan_layers=false."""
    import jax

    decoder = dict(params["params"]["decoder"])
    stacked = decoder.pop("layers")
    for i in range(2):
        decoder[f"layers_{i}"] = jax.tree.map(lambda a, i=i: np.take(a, i, axis=1), stacked)
    return {"params": {**params["params"], "decoder": decoder}}


def test_sizes_come_from_maxtexts_config():
    shape = _shape()
    config = shape.hf_config("float32", {"bos_token_id": None, "eos_token_id": None})
    assert {k: config[k] for k in TINY_HF} == TINY_HF
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert config["rope_parameters"] == {"rope_type": "default", "rope_theta": 10_000.0}
    assert config["eos_token_id"] is None, "vLLM would stop at a byte the model may emit"
    scaled = _shape(rope_type=SimpleNamespace(value="llama3.1"), rope_max_timescale=500_000)
    rope = scaled.hf_config("bfloat16", {})["rope_parameters"]
    assert (rope["rope_type"], rope["factor"], rope["rope_theta"]) == ("llama3", 8.0, 500_000.0)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"decoder_block": SimpleNamespace(value="gemma2")}, "decoder_block"),
        ({"rope_type": SimpleNamespace(value="yarn")}, "rope_type"),
    ],
)
def test_models_export_cannot_write_are_refused_with_the_way_out(change, field):
    with pytest.raises(UsageError) as e:
        _shape(**change)
    assert e.value.field == field and "to_huggingface" in e.value.fix


def test_scanned_and_unscanned_checkpoints_give_the_same_model():
    params = _scanned_params(np.random.default_rng(0))
    scanned = to_hf_tensors(params, _shape())
    unscanned = to_hf_tensors(_unscanned(params), _shape(scan_layers=False))
    assert scanned.keys() == unscanned.keys() and len(scanned) == 3 + 2 * 9
    for name, tensor in scanned.items():
        np.testing.assert_array_equal(tensor, unscanned[name], err_msg=name)
    # Hugging Face's Linear layout: [out, in]; MaxText's query kernel carries 1/sqrt(head_dim).
    q = params["params"]["decoder"]["layers"]["self_attention"]["query"]["kernel"][:, 0]
    np.testing.assert_allclose(
        scanned["model.layers.0.self_attn.q_proj.weight"], q.reshape(64, 64).T * 4.0, rtol=1e-6
    )


def test_a_checkpoint_missing_parameters_is_named():
    params = _scanned_params(np.random.default_rng(1))
    del params["params"]["decoder"]["layers"]["mlp"]
    with pytest.raises(UsageError) as e:
        to_hf_tensors(params, _shape())
    assert e.value.field == "checkpoint" and "mlp-wi_0" in e.value.problem


def test_the_byte_tokenizer_maps_every_byte_to_its_own_id(tmp_path):
    byte_tokenizer_files(tmp_path)
    tokenizer = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert sorted(tokenizer.get_vocab().values()) == list(range(256))
    # Every byte value appears in some UTF-8 text: ASCII, the 2-byte and the 3- and 4-byte leads.
    samples = [chr(c) for c in range(128)] + [chr(c) for c in range(0x80, 0x800, 7)]
    samples += ["\u20ac", "\uffee", "\U0001f600", "\U00100000"]
    for text in samples:
        ids = tokenizer.encode(text).ids
        assert ids == list(text.encode()) and tokenizer.decode(ids) == text, text
    seen = {b for text in samples for b in text.encode()}
    assert seen >= set(range(0x80)) | set(range(0x80, 0xC0)) | set(range(0xC2, 0xE0))


def test_the_context_a_model_was_made_for_comes_from_its_import(tmp_path):
    """export writes the imported model's max_position_embeddings, through the runs that
    started from it (--from=RUN), not the length the run trained at."""
    import json

    from launcher.core.maxtext.args import MaxTextArgs
    from launcher.core.maxtext.model_imports import IMPORT_RECORD
    from launcher.runtime.models.card import base_model_config

    imported = tmp_path / "imports" / "m"
    (imported / "0" / "items").mkdir(parents=True)
    (imported / IMPORT_RECORD).write_text("{}")
    (imported / "config.json").write_text(json.dumps({"max_position_embeddings": 131072}))
    args = MaxTextArgs.parse(["tiny-llama.yml", f"load_parameters_path={imported}/0/items"])
    assert base_model_config(args) == {"max_position_embeddings": 131072}
    scratch = MaxTextArgs.parse(["tiny-llama.yml", "run_name=r"])
    assert base_model_config(scratch) is None  # begun here: the export keeps its own length
