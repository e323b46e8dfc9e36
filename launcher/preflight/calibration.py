"""The published runs the step model is calibrated on (data/calibration_runs.json), and the model
fitted to them.

Each run names its slice, the MaxText arguments and LIBTPU_INIT_ARGS it ran with, what was
measured and where it was published. `terms` is what preflight's compile of that run reads
(recorded by `benchmarks/advice_calibration.py --record`, with the versions it compiled with):
the fit needs no compile, and the benchmark checks the record against a fresh compile.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from launcher.core.maxtext_args import MaxTextArgs
from launcher.core.slices import TpuSlices
from launcher.core.tpu_table import tpu_type
from launcher.preflight.memory_report import MemoryReport
from launcher.preflight.step_model import StepModel, StepTerms, fit, step_terms

DATA = Path(__file__).parent / "data" / "calibration_runs.json"
# The report fields a run's record keeps.
RECORDED = ("flops", "remat_flops", "hbm_bytes", "ici_bytes", "arguments_gib", "temporaries_gib")


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
        )
        for r in doc["runs"]
    ]


def record_terms(run_terms: dict[str, dict], path: Path = DATA) -> None:
    """Writes each named run's compiled terms into the data file."""
    doc = json.loads(path.read_text())
    for r in doc["runs"]:
        if r["name"] in run_terms:
            r["terms"] = run_terms[r["name"]]
    path.write_text(json.dumps(doc, indent=2) + "\n")


def fit_runs(runs: list[CalibrationRun]) -> StepModel:
    return fit([(r.step_terms(), r.measured_step_s()) for r in runs])


@cache
def calibrated_model() -> StepModel:
    """The model fitted to every recorded run."""
    runs = [r for r in load_runs() if r.terms]
    if not runs:
        raise RuntimeError(f"no calibration run in {DATA} has recorded terms")
    return fit_runs(runs)


def generation_flags(generation: str) -> str:
    """The LIBTPU_INIT_ARGS of the fastest published run (TFLOP/s per chip) on this TPU
    generation, as the installed libtpu accepts them; "" when none was published."""
    runs = [
        r for r in load_runs() if r.target.shape.generation.name == generation and r.libtpu_flags
    ]
    best = max(runs, key=lambda r: float(r.measured["tflops_per_chip"]), default=None)
    return best.libtpu_flags if best else ""


def errors_on(generation: str) -> dict[str, float]:
    """The calibrated model's relative error on each recorded run of this TPU generation."""
    model = calibrated_model()
    return {
        r.name: model.predict(r.step_terms()) / r.measured_step_s() - 1
        for r in load_runs()
        if r.terms and r.target.shape.generation.name == generation
    }
