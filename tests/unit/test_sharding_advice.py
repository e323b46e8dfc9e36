"""Candidate splits follow the slice's physical axes; each keeps the job's other arguments."""

from __future__ import annotations

import shlex
from dataclasses import asdict, replace
from itertools import combinations
from math import prod

import pytest

from harness.tutorial import LLAMA3_8B
from launcher.core.job.plan import parse_job_args
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.tpu.slices import TpuSlices
from launcher.core.tpu.table import tpu_type
from launcher.preflight.advice_report import paste_args, render
from launcher.preflight.calibration import calibrated_model
from launcher.preflight.memory_report import MemoryReport
from launcher.preflight.sharding_advice import (
    HBM_MARGIN,
    Advice,
    Candidate,
    Progress,
    _estimate,
    candidate_splits,
    with_split,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("name", "chips_per_host"),
    [
        ("v6e-16", 4),
        ("v5p-16", 4),
        ("v6e-32", 4),
        ("v6e-8", 8),
        ("v6e-128", 4),
        ("tpu7x-16", 4),  # 2x2x2 chips, two devices each: 16 devices, 8 per host
        ("tpu7x-128", 4),
    ],
)
def test_every_candidate_covers_the_slice_with_whole_physical_axes(name, chips_per_host):
    shape = tpu_type(name, chips_per_host)
    # The device axes: the torus's, and on tpu7x the two devices of each chip.
    dims = [int(d) for d in shape.topology.split("x")] + [shape.generation.devices_per_chip]
    splits = candidate_splits(shape)
    assert splits[0] == {"ici_fsdp_parallelism": shape.devices}  # fsdp only first
    assert len({tuple(sorted(s.items())) for s in splits}) == len(splits)
    for split in splits:
        assert prod(split.values()) == shape.devices
        assert split["ici_fsdp_parallelism"] > 1
        assert split.get("ici_tensor_parallelism", 1) <= shape.devices_per_host
        for size in split.values():  # a product of some of the physical axes
            assert any(
                prod(c) == size for r in range(1, len(dims) + 1) for c in combinations(dims, r)
            )


def test_the_tutorial_slice_gets_fsdp_and_fsdp_x_tensor_4():
    splits = candidate_splits(tpu_type("v6e-16"))
    assert {"ici_fsdp_parallelism": 4, "ici_tensor_parallelism": 4} in splits
    assert {"ici_fsdp_parallelism": 16} in splits


def test_tpu7x_splits_count_devices_and_keep_tensor_within_a_host():
    splits = candidate_splits(tpu_type("tpu7x-16"))
    assert {"ici_fsdp_parallelism": 16} in splits
    assert {"ici_fsdp_parallelism": 2, "ici_tensor_parallelism": 8} in splits  # a host's 8
    assert all(s.get("ici_tensor_parallelism", 1) <= 8 for s in splits)


def test_with_split_resets_other_axes_and_puts_data_over_dcn():
    args = MaxTextArgs.parse(
        [
            "tiny-llama.yml",
            "run_name=r",
            "ici_tensor_parallelism=4",
            "ici_fsdp_parallelism=4",
            "per_device_batch_size=2",
        ]
    )
    split = with_split(args, {"ici_fsdp_parallelism": 16}, num_slices=2)
    assert int(split.get("ici_fsdp_parallelism")) == 16
    assert int(split.get("ici_tensor_parallelism")) == 1
    assert int(split.get("dcn_data_parallelism")) == 2
    assert int(split.get("per_device_batch_size")) == 2
    assert int(args.get("ici_tensor_parallelism")) == 4  # the job's own args are untouched
    split.check_parallelism(16, 2, "2 x v6e-16")  # a split the launcher itself accepts


V6E_16 = TpuSlices(tpu_type("v6e-16"))


def probe(split: dict[str, int]) -> Candidate:
    """A probe as compiled: llama3-8b, batch 1, remat full (figures like the tutorial job's)."""
    report = MemoryReport(
        target="v6e-16",
        hbm_gib=32,
        arguments_gib=5.6,
        outputs_gib=5.6,
        aliased_gib=5.6,
        temporaries_gib=2.0,
        compile_seconds=60,
        fits=True,
        flops=197.6e12,
        remat_flops=LLAMA3_8B.remat_flops(),
        hbm_bytes=7.4e11,
        ici_bytes=6.4e10,
        model_dims=asdict(LLAMA3_8B),
    )
    return Candidate(split, "full", 1, probe=True, report=report)


def test_estimates_grow_with_the_batch_and_stop_short_of_the_hbm():
    p = probe({"ici_fsdp_parallelism": 16})
    by_batch = {b: _estimate(p, "full", b, V6E_16) for b in (1, 2, 4, 8, 16, 32)}
    fitting = {b: c for b, c in by_batch.items() if c is not None}
    assert 8 in fitting and 32 not in fitting
    for b, c in fitting.items():
        assert c.estimated_gib <= 32 * (1 - HBM_MARGIN)
        assert c.estimated_flops == pytest.approx(197.6e12 * b)
    gib = [c.estimated_gib for c in fitting.values()]
    assert gib == sorted(gib)


def test_a_policy_that_keeps_more_recomputes_less_and_holds_more():
    p = probe({"ici_fsdp_parallelism": 16})
    full, minimal = _estimate(p, "full", 1, V6E_16), _estimate(p, "minimal", 1, V6E_16)
    assert minimal.estimated_terms.compute_s < full.estimated_terms.compute_s
    assert minimal.estimated_gib > full.estimated_gib
    assert _estimate(p, "minimal", 4, V6E_16) is None  # 4 x 11 GiB of kept activations


def test_tensor_parallel_collectives_grow_with_the_batch_fsdp_ones_do_not():
    fsdp = probe({"ici_fsdp_parallelism": 16})
    tensor = probe({"ici_fsdp_parallelism": 4, "ici_tensor_parallelism": 4})
    assert _estimate(fsdp, "full", 4, V6E_16).estimated_terms.ici_s == pytest.approx(
        _estimate(fsdp, "full", 1, V6E_16).estimated_terms.ici_s
    )
    assert _estimate(tensor, "full", 4, V6E_16).estimated_terms.ici_s == pytest.approx(
        4 * _estimate(tensor, "full", 1, V6E_16).estimated_terms.ici_s
    )


def test_paste_args_change_the_job_in_place_and_round_trip_through_the_launcher():
    job = [
        "--tpu=v6e-16",
        "base.yml",
        "model_name=llama3-8b",
        "per_device_batch_size=1",
        "ici_fsdp_parallelism=4",
        "ici_tensor_parallelism=4",
        "run_name=r",
    ]
    flags = "--xla_enable_async_all_gather=true --xla_tpu_enable_async_collective_fusion=true"
    text = paste_args(
        parse_job_args(job),
        {
            "ici_fsdp_parallelism": "16",
            "ici_tensor_parallelism": "1",
            "per_device_batch_size": "8",
            "remat_policy": "full",
        },
        flags,
    )
    job = parse_job_args(shlex.split(text))
    options, maxtext = job.options, list(job.maxtext_argv)
    assert options.tpu == "v6e-16" and options.libtpu_init_args == flags
    assert maxtext == [
        "base.yml",
        "model_name=llama3-8b",
        "per_device_batch_size=8",
        "ici_fsdp_parallelism=16",
        "ici_tensor_parallelism=1",
        "run_name=r",
        "remat_policy=full",
    ]


def _advice_on(name: str) -> str:
    """The advice's text for one compiled candidate (the job as given) on slice `name`."""
    shape = tpu_type(name)
    gen = shape.generation
    given = probe({"ici_fsdp_parallelism": shape.devices})
    given.report = replace(
        given.report,
        target=name,
        hbm_gib=gen.per_device(gen.hbm_gib),
        devices_per_chip=gen.devices_per_chip,
    )
    job = ["base.yml", "run_name=r", f"ici_fsdp_parallelism={shape.devices}"]
    advice = Advice(
        target=TpuSlices(shape),
        job=MaxTextArgs.parse(job),
        job_flags="",
        flags="",
        model=calibrated_model(),
        given=given,
        candidates=[given],
        best=given,
        seq=4096,
    )
    return render(advice, parse_job_args(job))


def test_the_advice_says_how_far_its_step_model_is_out_of_sample_or_that_it_is_not(
    monkeypatch,
):
    """Published runs are recorded for every generation, Ironwood (tpu7x) included: the advice
    gives the model's error on runs a fit did not see, and counts per device (half a chip) on
    Ironwood. A generation with none would be said NOT CALIBRATED."""
    ironwood = _advice_on("tpu7x-16")
    assert "NOT CALIBRATED" not in ironwood
    assert "on tpu7x the model's error out of sample" in ironwood
    assert "PREDICTED per device" in ironwood and "tokens/s/device" in ironwood
    assert "peak 1153.5 TFLOP/s" in ironwood  # 2,307 per chip, two devices
    trillium = _advice_on("v6e-16")
    assert "NOT CALIBRATED" not in trillium and "on v6e the model's error out of sample" in trillium
    assert "tokens/s/chip" in trillium
    monkeypatch.setattr("launcher.preflight.advice_report.errors_on", lambda gen: {})
    assert "NOT CALIBRATED on v6e" in _advice_on("v6e-16")


def test_the_progress_bar_counts_compiles_against_the_most_there_can_be():
    lines: list[str] = []
    progress = Progress(lines.append, planned=4)
    progress.say("compiling a")
    progress.finished("compiled a")
    progress.fewer(2)  # estimates showed two compiles cannot win
    progress.say("compiling b")
    progress.finished("compiled b")
    progress.fewer(5)  # never below what is done
    progress.say("done")
    assert lines == [
        "advice [....................] 0/4 compiles: compiling a",
        "advice [#####...............] 1/4 compiles: compiled a",
        "advice [##########..........] 1/2 compiles: compiling b",
        "advice [####################] 2/2 compiles: compiled b",
        "advice [####################] 2/2 compiles: done",
    ]
