"""How long one training step takes on a TPU: the terms a compile shows, weighed by what
published runs measured.

From the ahead-of-time compile (see compile_engine) and the TPU table, per device and step (a
device is a chip, but half a chip on tpu7x, whose TensorCores are devices of their own):

    compute = (MaxText's model FLOPs + what the remat policy recomputes) / peak bf16 FLOP/s
    hbm     = HBM bytes (XLA's rule, every loop trip counted) / HBM bandwidth
    ici     = collective bytes / ICI bandwidth (all of a device's links)
    dcn     = bytes between slices / a nominal 100 Gb/s per chip (several slices only)

A roofline takes max(compute, hbm, ici): a lower bound no real step reaches. The calibrated
model adds the terms, each with its own weight fitted (non-negative least squares on the
relative error) to measured runs (see calibration):

    step = w_compute[generation] * compute + w_hbm * hbm + w_ici * ici + w_dcn * dcn

with a compute weight per TPU generation that has at least MIN_RUNS published runs (how near its
peak real kernels get on that chip; the other generations share one weight, and a generation
without runs takes the weight fitted to all runs with one), and one ICI weight for
jobs whose collectives XLA runs asynchronously beside the compute (the async-collective
LIBTPU_INIT_ARGS MaxText's recipes set) and another for jobs without them. The weights say how
far real kernels are from the peak figures (w_compute >= 1), how much of the counted HBM traffic
is not hidden behind the matrix units, and how much collective time is exposed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from launcher.core.tpu.table import Generation
from launcher.preflight.memory_report import MemoryReport

# A generation gets its own compute weight from this many runs: fewer fix it to their own
# errors (two v6e runs once gave -57% and +130% left out).
MIN_RUNS = 3
# DCN's bandwidth is no figure of the TPU table (it is the hosts' NICs, not the chips'): a
# nominal 100 Gb/s per chip, so that w_dcn reads as how far from it the slices' traffic ran.
NOMINAL_DCN_GBPS_PER_CHIP = 100

# LIBTPU_INIT_ARGS that let XLA overlap collectives with compute (in MaxText's recipes).
ASYNC_COLLECTIVE_FLAGS = (
    "--xla_tpu_enable_async_collective_fusion=true",
    "--xla_enable_async_all_gather=true",
)


def overlaps_collectives(libtpu_flags: str) -> bool:
    return any(flag in libtpu_flags.split() for flag in ASYNC_COLLECTIVE_FLAGS)


@dataclass(frozen=True)
class StepTerms:
    """One step's terms in seconds at the device's peak figures."""

    compute_s: float
    hbm_s: float
    ici_s: float
    overlapped: bool  # async-collective flags set
    generation: str = ""  # the TPU generation (its own compute weight)
    dcn_s: float = 0.0  # between slices (several slices only)

    @property
    def roofline_s(self) -> float:
        return max(self.compute_s, self.hbm_s, self.ici_s)


def step_terms(report: MemoryReport, gen: Generation, libtpu_flags: str) -> StepTerms:
    return StepTerms(
        compute_s=(report.flops + report.remat_flops)
        / (gen.per_device(gen.peak_bf16_tflops) * 1e12),
        hbm_s=report.hbm_bytes / (gen.per_device(gen.hbm_gbps) * 1e9),
        ici_s=report.ici_bytes / (gen.per_device(gen.ici_gbps) / 8 * 1e9),
        overlapped=overlaps_collectives(libtpu_flags),
        generation=gen.name,
        dcn_s=report.dcn_bytes / (gen.per_device(NOMINAL_DCN_GBPS_PER_CHIP) / 8 * 1e9),
    )


@dataclass(frozen=True)
class StepModel:
    """The fitted weights. Each TPU generation with MIN_RUNS published runs has its own compute
    weight (how near its peak real kernels get); another generation takes `compute`."""

    compute: float  # the generations without a weight of their own
    hbm: float
    ici_exposed: float  # without async-collective flags
    ici_overlapped: float  # with them
    compute_by_generation: tuple[tuple[str, float], ...] = ()
    dcn: float = 0.0

    def compute_weight(self, generation: str) -> float:
        return dict(self.compute_by_generation).get(generation, self.compute)

    def predict(self, terms: StepTerms) -> float:
        ici = self.ici_overlapped if terms.overlapped else self.ici_exposed
        return (
            self.compute_weight(terms.generation) * terms.compute_s
            + self.hbm * terms.hbm_s
            + ici * terms.ici_s
            + self.dcn * terms.dcn_s
        )

    def describe(self) -> str:
        by_gen = ", ".join(f"{g} {w:.2f}" for g, w in self.compute_by_generation)
        return (
            f"step = w x compute ({by_gen + '; ' if by_gen else ''}other TPUs "
            f"{self.compute:.2f}) + {self.hbm:.2f} x HBM + {self.ici_overlapped:.2f} x ICI "
            f"(async collectives) or {self.ici_exposed:.2f} x ICI (without) + "
            f"{self.dcn:.2f} x DCN"
        )


def _features(terms: StepTerms, own: list[str]) -> list[float]:
    """One compute column per generation of its own, one shared by the others."""
    compute = [terms.compute_s if terms.generation == g else 0.0 for g in own]
    return [
        *compute,
        0.0 if terms.generation in own else terms.compute_s,
        terms.hbm_s,
        0.0 if terms.overlapped else terms.ici_s,
        terms.ici_s if terms.overlapped else 0.0,
        terms.dcn_s,
    ]


def _nnls(points: list[tuple[StepTerms, float]], own: list[str]) -> list[float]:
    import numpy as np
    from scipy.optimize import nnls

    a = np.array([[f / measured for f in _features(t, own)] for t, measured in points])
    weights, _ = nnls(a, np.ones(len(points)))
    return [float(w) for w in weights]


def fit(points: list[tuple[StepTerms, float]], min_runs: int = MIN_RUNS) -> StepModel:
    """Weights minimising the squared relative error over (terms, measured step seconds)."""
    counts = Counter(t.generation for t, _ in points)
    own = sorted(g for g, n in counts.items() if g and n >= min_runs)
    weights = _nnls(points, own)
    shared, hbm, exposed, overlapped, dcn = weights[len(own) :]
    if all(t.generation in own for t, _ in points):  # nothing to fit a shared weight on
        shared = _nnls(points, [])[0]
    by_gen = tuple(zip(own, weights[: len(own)], strict=True))
    return StepModel(shared, hbm, exposed, overlapped, by_gen, dcn)
