"""What a remat policy costs: FLOPs counted as MaxText counts them, and HBM kept per token."""

from __future__ import annotations

import pytest

from harness.tutorial import LLAMA3_8B
from launcher.preflight.calibration import load_runs
from launcher.preflight.remat_costs import KEPT_BY_POLICY, OFFLOADED, ModelDims
from launcher.preflight.sharding_advice import POLICIES

pytestmark = pytest.mark.unit

VOCAB = 128256


def test_the_forward_count_is_maxtexts_own_count_of_the_tutorial_job():
    # MaxText's training FLOPs = 3 x the layers' forward + 3 x the unembedding's; the tutorial
    # run's recorded compile holds MaxText's own figure for the job.
    tutorial = next(r for r in load_runs() if r.name == "gke-tutorial-llama3-8b")
    per_token = sum(LLAMA3_8B.forward_flops_per_token().values())
    ours = 3 * (per_token * LLAMA3_8B.num_decoder_layers + 2 * LLAMA3_8B.emb_dim * VOCAB)
    assert ours * LLAMA3_8B.tokens_per_device == pytest.approx(tutorial.report().flops, rel=1e-3)


def test_full_remat_runs_every_layer_forward_again_and_keeps_nothing_more():
    layers_forward = (
        sum(LLAMA3_8B.forward_flops_per_token().values())
        * LLAMA3_8B.num_decoder_layers
        * LLAMA3_8B.tokens_per_device
    )
    assert LLAMA3_8B.remat_flops() == layers_forward
    assert LLAMA3_8B.kept_bytes() == 0


def test_policies_trade_flops_for_memory_in_the_order_searched():
    costs = [LLAMA3_8B.with_job(p, 1) for p in POLICIES]
    flops = [c.remat_flops() for c in costs]
    kept = [c.kept_bytes() for c in costs]
    assert flops == sorted(flops, reverse=True) and len(set(flops)) == len(flops)
    assert kept == sorted(kept) and len(set(kept)) == len(kept)
    # minimal keeps every matmul output: only the attention context runs again
    minimal = LLAMA3_8B.with_job("minimal", 1)
    context = LLAMA3_8B.forward_flops_per_token()["context"]
    assert minimal.remat_flops() == context * 32 * 4096


def test_memory_and_flops_grow_with_the_batch():
    one, four = LLAMA3_8B.with_job("save_qkv_proj", 1), LLAMA3_8B.with_job("save_qkv_proj", 4)
    assert four.kept_bytes() == 4 * one.kept_bytes() > 0
    assert four.remat_flops() == 4 * one.remat_flops() > 0


def test_offloaded_policies_keep_nothing_in_hbm():
    for policy in OFFLOADED:
        assert policy in KEPT_BY_POLICY
        assert LLAMA3_8B.with_job(policy, 2).kept_bytes() == 0


def test_a_custom_policy_reads_maxtexts_per_tensor_settings():
    class Config:  # the attributes MaxText's config has for a custom policy
        emb_dim, mlp_dim, num_query_heads, num_kv_heads, head_dim = 4096, 14336, 32, 8, 128
        num_decoder_layers, mlp_activations, max_target_length = 32, ["silu", "linear"], 4096
        per_device_batch_size, remat_policy = 1, "custom"
        query_proj = key_proj = value_proj = "offload"
        out_proj = "device"
        mlpwi_0, mlpwi_1, mlpwo, context = "device", "remat", "remat", "remat"

    dims = ModelDims.of(Config())
    assert dims.kept() == {"query_proj", "key_proj", "value_proj", "out_proj"}
    assert dims.mlp_activations == 2
