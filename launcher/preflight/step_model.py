"""How long one training step takes on a TPU: the terms a compile shows, weighed by what
published runs measured.

From the ahead-of-time compile (see compile_engine) and the TPU table, per device and step (a
device is a chip, but half a chip on tpu7x, whose TensorCores are devices of their own):

    compute = (MaxText's model FLOPs + what the remat policy recomputes) / peak bf16 FLOP/s
    hbm     = HBM bytes (XLA's rule, every loop trip counted) / HBM bandwidth
    ici     = collective bytes / ICI bandwidth (all of a device's links)

A roofline takes max(compute, hbm, ici): a lower bound no real step reaches. The calibrated
model adds the terms, each with its own weight fitted (non-negative least squares on the
relative error) to measured runs (see calibration):

    step = w_compute[generation] * compute + w_hbm * hbm + w_ici * ici

with a compute weight per TPU generation (how near its peak real kernels get on that chip; a
generation without published runs takes the weight fitted to all runs), and one ICI weight for
jobs whose collectives XLA runs asynchronously beside the compute (the async-collective
LIBTPU_INIT_ARGS MaxText's recipes set) and another for jobs without them. The weights say how
far real kernels are from the peak figures (w_compute >= 1), how much of the counted HBM traffic
is not hidden behind the matrix units, and how much collective time is exposed.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.tpu_table import Generation
from launcher.preflight.memory_report import MemoryReport

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
    )


@dataclass(frozen=True)
class StepModel:
    """The fitted weights. Each TPU generation with published runs has its own compute weight
    (how near its peak real kernels get); another generation takes the one fitted to all."""

    compute: float  # fitted to every run with one compute weight
    hbm: float
    ici_exposed: float  # without async-collective flags
    ici_overlapped: float  # with them
    compute_by_generation: tuple[tuple[str, float], ...] = ()

    def compute_weight(self, generation: str) -> float:
        return dict(self.compute_by_generation).get(generation, self.compute)

    def predict(self, terms: StepTerms) -> float:
        ici = self.ici_overlapped if terms.overlapped else self.ici_exposed
        return (
            self.compute_weight(terms.generation) * terms.compute_s
            + self.hbm * terms.hbm_s
            + ici * terms.ici_s
        )

    def describe(self) -> str:
        by_gen = ", ".join(f"{g} {w:.2f}" for g, w in self.compute_by_generation)
        return (
            f"step = w x compute ({by_gen + '; ' if by_gen else ''}other TPUs "
            f"{self.compute:.2f}) + {self.hbm:.2f} x HBM + {self.ici_overlapped:.2f} x ICI "
            f"(async collectives) or {self.ici_exposed:.2f} x ICI (without)"
        )


def _features(terms: StepTerms, generations: list[str]) -> list[float]:
    compute = [terms.compute_s if terms.generation == g else 0.0 for g in generations]
    return [
        *(compute or [terms.compute_s]),
        terms.hbm_s,
        0.0 if terms.overlapped else terms.ici_s,
        terms.ici_s if terms.overlapped else 0.0,
    ]


def _nnls(points: list[tuple[StepTerms, float]], generations: list[str]) -> list[float]:
    import numpy as np
    from scipy.optimize import nnls

    a = np.array([[f / measured for f in _features(t, generations)] for t, measured in points])
    weights, _ = nnls(a, np.ones(len(points)))
    return [float(w) for w in weights]


def fit(points: list[tuple[StepTerms, float]]) -> StepModel:
    """Weights minimising the squared relative error over (terms, measured step seconds)."""
    pooled = _nnls(points, [])
    generations = sorted({t.generation for t, _ in points if t.generation})
    if not generations:
        compute, hbm, exposed, overlapped = pooled
        return StepModel(compute, hbm, exposed, overlapped)
    weights = _nnls(points, generations)
    by_gen = tuple(zip(generations, weights[: len(generations)], strict=True))
    hbm, exposed, overlapped = weights[len(generations) :]
    return StepModel(pooled[0], hbm, exposed, overlapped, compute_by_generation=by_gen)
