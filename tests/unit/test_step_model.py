"""The step model: fitted weights, the calibration data it is fitted to, and how close it comes
to every published run."""

from __future__ import annotations

from importlib import metadata

import pytest

from harness.tutorial import TUTORIAL_JOB_ARGS
from launcher.preflight.calibration import (
    calibrated_model,
    fit_runs,
    generation_flags,
    held_out_set,
    load_runs,
    recorded_runs,
)
from launcher.preflight.step_model import StepModel, StepTerms, fit, overlaps_collectives

pytestmark = pytest.mark.unit
TARGET = 0.25  # every run the model was fitted to within +-25%


def test_the_fit_recovers_known_weights_with_one_compute_weight_per_generation():
    truth = StepModel(
        compute=1.1,
        hbm=0.4,
        ici_exposed=5.0,
        ici_overlapped=0.2,
        compute_by_generation=(("v5p", 1.2), ("v6e", 1.7)),
        dcn=0.8,
    )
    terms = [
        StepTerms(1.0, 0.5, 0.1, True, "v5p"),
        StepTerms(2.0, 0.3, 0.4, True, "v5p", dcn_s=0.5),
        StepTerms(0.2, 0.45, 0.15, False, "v6e"),
        StepTerms(0.5, 0.9, 0.3, False, "v5p"),
        StepTerms(3.0, 1.0, 0.05, True, "v6e", dcn_s=0.2),
        StepTerms(1.5, 0.2, 0.2, True, "v6e"),
        # two runs are too few for a weight of their own: v4 and v5e share one
        StepTerms(1.0, 0.3, 0.1, True, "v4"),
        StepTerms(2.0, 0.1, 0.3, False, "v5e", dcn_s=0.1),
    ]
    fitted = fit([(t, truth.predict(t)) for t in terms])
    assert dict(fitted.compute_by_generation) == pytest.approx({"v5p": 1.2, "v6e": 1.7})
    assert (fitted.hbm, fitted.ici_exposed, fitted.ici_overlapped) == pytest.approx((0.4, 5, 0.2))
    assert fitted.dcn == pytest.approx(0.8)
    # the generations with fewer runs, and one no run was measured on, share a weight
    assert fitted.compute_weight("v4") == fitted.compute_weight("tpu7x") == pytest.approx(1.1)


def test_the_fit_recovers_known_weights():
    truth = StepModel(compute=1.3, hbm=0.4, ici_exposed=5.0, ici_overlapped=0.2)
    terms = [
        StepTerms(1.0, 0.5, 0.1, True),
        StepTerms(2.0, 0.3, 0.4, True),
        StepTerms(0.2, 0.45, 0.15, False),
        StepTerms(0.5, 0.9, 0.3, False),
        StepTerms(3.0, 1.0, 0.05, True),
    ]
    fitted = fit([(t, truth.predict(t)) for t in terms])

    def weights(m: StepModel) -> tuple[float, ...]:
        return (m.compute, m.hbm, m.ici_exposed, m.ici_overlapped, m.dcn)

    assert weights(fitted) == pytest.approx(weights(truth), rel=1e-6)


def test_weights_are_never_negative():
    # a point the others contradict must not buy a negative weight
    terms = [StepTerms(1.0, 1.0, 0.0, True), StepTerms(1.0, 2.0, 0.0, True)]
    fitted = fit([(terms[0], 2.0), (terms[1], 1.0)])
    assert min(fitted.compute, fitted.hbm, fitted.ici_exposed, fitted.ici_overlapped) >= 0


def test_async_collective_flags_are_recognised():
    assert overlaps_collectives("--xla_enable_async_all_gather=true")
    assert overlaps_collectives("--a=1 --xla_tpu_enable_async_collective_fusion=true")
    assert not overlaps_collectives("")
    assert not overlaps_collectives("--xla_tpu_enable_async_collective_fusion=false")


def test_every_calibration_run_is_a_valid_job_with_a_source_and_a_measurement():
    runs = load_runs()
    assert len({r.name for r in runs}) == len(runs)
    for run in runs:
        assert run.target.shape is not None  # a slice name the TPU table knows
        run.maxtext_args().check_known_keys()  # arguments this MaxText accepts
        assert run.source["where"] and run.source["figure"]
        assert {"step_s", "tflops_per_chip"} & set(run.measured)
    # The floor: 30 published runs; of those the installed compiler fits, 8 on v6e, 3 on
    # Ironwood, 4 on several slices.
    assert len(runs) >= 30
    recorded = recorded_runs()
    assert sum(r.generation == "v6e" for r in recorded) >= 8
    assert sum(r.generation == "tpu7x" for r in recorded) >= 3
    assert sum(r.num_slices > 1 for r in recorded) >= 4


def test_every_run_was_recorded_with_the_installed_compiler_or_says_why_not():
    versions = {p: metadata.version(p) for p in ("maxtext", "jax", "libtpu")}
    for run in load_runs():
        if run.left_out:  # e.g. does not fit with the installed compiler
            assert run.terms is None, run.name
            continue
        assert run.terms, f"{run.name}: run benchmarks/advice_calibration.py --record"
        assert run.terms["versions"] == versions, (
            f"{run.name} was compiled with {run.terms['versions']}; installed: {versions}: "
            "run benchmarks/advice_calibration.py --record"
        )
        assert run.report().flops > 0 and run.report().hbm_bytes > 0
        assert (run.report().dcn_bytes > 0) == (run.num_slices > 1), run.name


def test_the_test_set_is_a_quarter_by_its_rule_and_the_model_never_sees_it():
    runs = recorded_runs()
    held_out = held_out_set(runs)
    # a quarter in expectation; 27 runs draw it within about +-2 runs (one sigma)
    assert 0.15 <= len(held_out) / len(runs) <= 0.4
    for gen in {r.generation for r in runs}:
        own = [r for r in runs if r.generation == gen]
        assert len(own) < 2 or any(r.name in held_out for r in own), gen
    assert calibrated_model() == fit_runs([r for r in runs if r.name not in held_out])


def test_the_calibrated_model_is_within_25_percent_of_every_run_it_was_fitted_to():
    runs = recorded_runs()
    fitted = [r for r in runs if r.name not in held_out_set(runs)]
    model = fit_runs(fitted)
    errors = {r.name: model.predict(r.step_terms()) / r.measured_step_s() - 1 for r in fitted}
    assert all(abs(e) <= TARGET for e in errors.values()), errors


def test_the_tutorial_run_is_the_gke_tutorials_job():
    tutorial = next(r for r in load_runs() if r.name == "gke-tutorial-llama3-8b")
    assert [*tutorial.args, "run_name=rayjob-8b-4096-tp4-4x4"] == TUTORIAL_JOB_ARGS
    assert tutorial.slice == "v6e-16" and not tutorial.libtpu_flags


def test_the_gke_tutorials_own_figures_are_consistent():
    # 3725 tokens/s/device = 4096 tokens / 1.100 s; 179.7 TFLOP/s = MaxText's FLOPs / 1.100 s
    tutorial = next(r for r in load_runs() if r.name == "gke-tutorial-llama3-8b")
    step = tutorial.measured_step_s()
    assert 4096 / step == pytest.approx(3725.218, rel=1e-3)
    assert tutorial.report().flops / step / 1e12 == pytest.approx(179.739, rel=2e-3)


def test_candidates_use_the_flags_every_overlapping_run_of_their_generation_shares():
    v6e = generation_flags("v6e").split()
    assert "--xla_tpu_enable_async_collective_fusion=true" in v6e
    for run in load_runs():
        if run.generation == "v6e" and overlaps_collectives(run.libtpu_flags):
            assert set(v6e) <= set(run.libtpu_flags.split()), run.name
    assert overlaps_collectives(generation_flags("v5p"))
    assert generation_flags("v7x") == ""
