"""The published runs the step model is calibrated on (data/calibration_runs.json), and the model
fitted to them.

Each run names its slice, the MaxText arguments and LIBTPU_INIT_ARGS it ran with, what was
measured and where it was published. `terms` is what preflight's compile of that run reads
(recorded by `benchmarks/advice_calibration.py --record`, with the versions it compiled with):
the fit needs no compile, and the benchmark checks the record against a fresh compile.

A quarter of the runs is a test set the fit never sees, chosen by a rule that reads only the
runs' names (written before any fit): a run is a test run when the first hexadecimal digit of
the SHA-256 of its name is 0-3; a generation with none gives the run of its own with the
smallest digest, where it has two or more. The model the advice uses is fitted to the others.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.tpu.slices import TpuSlices
from launcher.core.tpu.table import tpu_type
from launcher.preflight.memory_report import MemoryReport
from launcher.preflight.step_model import (
    StepModel,
    StepTerms,
    fit,
    overlaps_collectives,
    step_terms,
)

DATA = Path(__file__).parent / "data" / "calibration_runs.json"
# The report fields a run's record keeps.
RECORDED = ("flops", "remat_flops", "hbm_bytes", "ici_bytes", "dcn_bytes", "arguments_gib",
            "temporaries_gib")  # fmt: skip


@dataclass(frozen=True)
class CalibrationRun:
    name: str
    slice: str
    num_slices: int
    args: tuple[str, ...]
    libtpu_flags: str
    measured: dict
    source: dict
    terms: dict | None  # the recorded compile (RECORDED fields + versions), None before --record
    left_out: str = ""  # why the run has no terms (e.g. it does not fit with this compiler)

    @property
    def generation(self) -> str:
        return self.target.shape.generation.name

    @property
    def target(self) -> TpuSlices:
        return TpuSlices(tpu_type(self.slice), self.num_slices)

    def maxtext_args(self) -> MaxTextArgs:
        return MaxTextArgs.parse(["base.yml", *self.args, f"run_name={self.name}"])

    def report(self, terms: dict | None = None) -> MemoryReport:
        """The recorded compile (or `terms` of a fresh one) as a report; the memory fields not
        recorded are zero."""
        terms = terms if terms is not None else self.terms
        assert terms is not None, f"{self.name} has no recorded compile"
        fields = {k: terms.get(k, 0.0) for k in RECORDED}
        gen = self.target.shape.generation
        return MemoryReport(
            target=self.slice,
            hbm_gib=gen.per_device(gen.hbm_gib),
            devices_per_chip=gen.devices_per_chip,
            outputs_gib=0.0,
            aliased_gib=0.0,
            compile_seconds=0.0,
            fits=True,
            **fields,
        )

    def step_terms(self, report: MemoryReport | None = None) -> StepTerms:
        return step_terms(report or self.report(), self.target.shape.generation, self.libtpu_flags)

    def measured_step_s(self, flops: float | None = None) -> float:
        """The published step time; else MaxText's per-device TFLOPs over the published
        TFLOP/s per chip (how MaxText's log derives one from the other)."""
        if "step_s" in self.measured:
            return float(self.measured["step_s"])
        flops = flops if flops is not None else self.report().flops
        return flops / (float(self.measured["tflops_per_chip"]) * 1e12)


def load_runs(path: Path = DATA) -> list[CalibrationRun]:
    doc = json.loads(path.read_text())
    return [
        CalibrationRun(
            name=r["name"],
            slice=r["slice"],
            num_slices=r.get("num_slices", 1),
            args=tuple(r["args"]),
            libtpu_flags=r.get("libtpu_flags", ""),
            measured=r["measured"],
            source=r["source"],
            terms=r.get("terms"),
            left_out=r.get("left_out", ""),
        )
        for r in doc["runs"]
    ]


def record_terms(
    run_terms: dict[str, dict], left_out: dict[str, str] | None = None, path: Path = DATA
) -> None:
    """Writes each named run's compiled terms into the data file, or why it has none."""
    doc = json.loads(path.read_text())
    for r in doc["runs"]:
        if r["name"] in run_terms:
            r["terms"] = run_terms[r["name"]]
            r.pop("left_out", None)
        elif r["name"] in (left_out or {}):
            r["terms"] = None
            r["left_out"] = (left_out or {})[r["name"]]
    path.write_text(json.dumps(doc, indent=2) + "\n")


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def held_out_set(runs: list[CalibrationRun]) -> set[str]:
    """The names of the runs the fit never sees (the rule in this module's docstring)."""
    chosen = {r.name for r in runs if _digest(r.name)[0] in "0123"}
    for gen in {r.generation for r in runs}:
        own = sorted((r for r in runs if r.generation == gen), key=lambda r: _digest(r.name))
        if len(own) >= 2 and not any(r.name in chosen for r in own):
            chosen.add(own[0].name)
    return chosen


def fit_runs(runs: list[CalibrationRun]) -> StepModel:
    return fit([(r.step_terms(), r.measured_step_s()) for r in runs])


def recorded_runs() -> list[CalibrationRun]:
    return [r for r in load_runs() if r.terms]


@cache
def calibrated_model() -> StepModel:
    """The model fitted to every recorded run but the test set."""
    runs = recorded_runs()
    if not runs:
        raise RuntimeError(f"no calibration run in {DATA} has recorded terms")
    held_out = held_out_set(runs)
    return fit_runs([r for r in runs if r.name not in held_out])


def out_of_sample_errors(runs: list[CalibrationRun]) -> dict[str, tuple[str, float]]:
    """Each run's relative error by a model that never saw it: ("test", e) for a test run (the
    model fitted to the others but the test set), ("left out", e) for the others (the model
    fitted to the others but the test set and this run)."""
    held_out = held_out_set(runs)
    fitted = [r for r in runs if r.name not in held_out]
    model = fit_runs(fitted)
    errors = {}
    for run in runs:
        if run.name in held_out:
            errors[run.name] = ("test", model.predict(run.step_terms()) / run.measured_step_s() - 1)
        else:
            others = fit_runs([r for r in fitted if r is not run])
            predicted = others.predict(run.step_terms())
            errors[run.name] = ("left out", predicted / run.measured_step_s() - 1)
    return errors


@cache
def _recorded_errors() -> dict[str, tuple[str, float]]:
    return out_of_sample_errors(recorded_runs())


def generation_flags(generation: str) -> str:
    """The LIBTPU_INIT_ARGS every published run on this TPU generation that overlaps its
    collectives was run with (as the installed libtpu accepts them), in the order of the
    fastest of them: what Google's recipes for that chip agree on, not one recipe's tuning for
    its own model; "" when none was published."""
    runs = [
        r
        for r in load_runs()
        if r.generation == generation and overlaps_collectives(r.libtpu_flags)
    ]
    if not runs:
        return ""
    best = max(runs, key=lambda r: float(r.measured["tflops_per_chip"]))
    shared = set.intersection(*(set(r.libtpu_flags.split()) for r in runs))
    return " ".join(f for f in best.libtpu_flags.split() if f in shared)


def errors_on(generation: str) -> dict[str, float]:
    """The calibrated model's error out of sample on each recorded run of this TPU generation
    (see out_of_sample_errors)."""
    errors = _recorded_errors()
    return {r.name: errors[r.name][1] for r in recorded_runs() if r.generation == generation}
