"""Sharding advice: which per-device batch, remat policy and ICI split make this job train
fastest on this slice, predicted by a step model calibrated on published runs.

1. Probes: the job at its own batch with remat_policy=full, once per ICI split of the slice's
   physical axes (fsdp only, fsdp x tensor with tensor within a host, data x fsdp; across slices
   data parallelism over DCN), compiled ahead of time with the async-collective flags the
   published runs of this TPU generation used (see calibration).
2. Estimates, no compile: from each probe, for every remat policy, the largest batch whose
   memory (the probe's, its activations scaled with the batch, plus what the policy keeps per
   token: remat_costs) leaves a margin of the chip's HBM, and its step from the probe's terms
   scaled the same way. Candidates that cannot beat the best compiled one even at the compute
   bound are dropped.
3. The best estimates are compiled for real, one at a time, best first, while an estimate could
   still beat the best compiled candidate within how far estimates were measured to miss
   (ESTIMATE_MARGIN); if one does not fit, the next smaller batch is. Everything compiled that
   fits is ranked by the calibrated model's tokens/s per device.

A compile is minutes of both cores (XLA's TPU compiler runs on about two threads; the recipes'
async-collective flags double its time), so what is not compiled is most of what the advice saves.

It is a prediction from the compiled program and published measurements, not a measurement:
calibration says how far off it was on the published runs. advice_report.py prints it.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from math import prod

from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.tpu.slices import TpuSlices
from launcher.core.tpu.table import SliceShape
from launcher.preflight.calibration import calibrated_model, generation_flags
from launcher.preflight.compile_engine import CompileError, compile_report
from launcher.preflight.memory_report import GIB, MemoryReport
from launcher.preflight.remat_costs import ModelDims
from launcher.preflight.step_model import StepModel, StepTerms, step_terms

# Policies searched, from least HBM to most.
POLICIES = ("full", "save_qkv_proj", "save_dot_except_mlp", "minimal")
BATCHES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
HBM_MARGIN = 0.10  # estimates stay 10% under the chip's HBM: they are extrapolations
FINAL_COMPILES = 3  # estimated candidates compiled for real, at most
# How far an estimate may be optimistic: on the GKE tutorial's job estimates were within -0.3%
# to +9.4% of the same candidates compiled (docs/preflight.md). An estimate this much above its
# own figure that still cannot beat the best compiled candidate is not compiled.
ESTIMATE_MARGIN = 0.15
COMPILE_GIB = 4  # host memory one ahead-of-time compile of an 8B model takes, with headroom
COMPILE_THREADS = 2  # cores one compile keeps busy (an 8B compile alone: 232 s of CPU in 130 s)


def candidate_splits(shape: SliceShape) -> list[dict[str, int]]:
    """Every split of the slice's physical device axes over data, fsdp and tensor that MaxText
    can lay out (each logical axis a product of whole physical axes), with fsdp > 1 (without it
    every device holds all parameters) and tensor within a host. The axes are the torus's, and
    on tpu7x the two devices of each chip one more. fsdp-only comes first."""
    axes = [int(d) for d in shape.topology.split("x")] + [shape.generation.devices_per_chip]
    dims = [d for d in axes if d > 1]
    splits: list[dict[str, int]] = []
    for assignment in itertools.product(("data", "fsdp", "tensor"), repeat=len(dims)):
        sizes = {
            axis: prod(d for d, a in zip(dims, assignment, strict=True) if a == axis)
            for axis in ("data", "fsdp", "tensor")
        }
        split = {f"ici_{axis}_parallelism": n for axis, n in sizes.items() if n > 1}
        if sizes["fsdp"] > 1 and sizes["tensor"] <= shape.devices_per_host and split not in splits:
            splits.append(split)
    return sorted(splits, key=len)


def with_split(args: MaxTextArgs, split: dict[str, int], num_slices: int) -> MaxTextArgs:
    """The job's arguments with this split: every other ICI axis 1, data over DCN slices."""
    overrides = dict(args.overrides)
    for key in args.parallelism("ici"):
        overrides[key] = "1"
    overrides.update({k: str(v) for k, v in split.items()})
    for key in args.parallelism("dcn"):
        overrides[key] = "1"
    overrides["dcn_data_parallelism"] = str(num_slices)
    return MaxTextArgs(args.config, overrides)


def resolved_split(ici: dict[str, int], devices: int) -> dict[str, int]:
    """The job's ICI axes as sizes: MaxText's -1 (the rest of the slice) resolved."""
    known = prod(v for v in ici.values() if v > 0)
    return {k: (devices // known if v == -1 else v) for k, v in ici.items() if v != 1}


def plain_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass
class Candidate:
    split: dict[str, int]  # ici_*_parallelism overrides (the others are set to 1)
    remat: str
    batch: float  # per_device_batch_size
    probe: bool = False
    report: MemoryReport | None = None  # compiled
    estimated_gib: float = 0.0  # not compiled: extrapolated from its split's probe
    estimated_terms: StepTerms | None = None
    estimated_flops: float = 0.0  # MaxText's model FLOPs at this batch
    failed: str = ""  # why it did not compile

    @property
    def split_name(self) -> str:
        shown = [
            f"{k.removeprefix('ici_').removesuffix('_parallelism')}={v}"
            for k, v in self.split.items()
            if v != 1
        ]
        return " x ".join(shown) or "none"

    @property
    def name(self) -> str:
        return f"{self.split_name}, {self.remat}, batch {plain_number(self.batch)}"

    @property
    def key(self) -> tuple:
        return (tuple(sorted(self.split.items())), self.remat, self.batch)

    def overrides(self) -> dict[str, str]:
        """What this candidate changes in the job's MaxText arguments."""
        return {
            **{k: str(v) for k, v in self.split.items()},
            "remat_policy": self.remat,
            "per_device_batch_size": plain_number(self.batch),
        }

    def args(self, job: MaxTextArgs, num_slices: int) -> MaxTextArgs:
        split = with_split(job, self.split, num_slices)
        return MaxTextArgs(
            split.config,
            {
                **split.overrides,
                "remat_policy": self.remat,
                "per_device_batch_size": plain_number(self.batch),
            },
        )

    @property
    def fits(self) -> bool:
        return bool(self.report and self.report.fits and self.report.flops)


@dataclass
class Prediction:
    step_s: float
    tokens_per_chip_s: float
    mfu: float  # MaxText's model FLOPs over the chip's peak


@dataclass
class Advice:
    target: TpuSlices
    job: MaxTextArgs
    job_flags: str
    flags: str  # the LIBTPU_INIT_ARGS candidates are compiled and predicted with
    model: StepModel
    given: Candidate  # the job as given
    candidates: list[Candidate]  # probes, estimates, finals
    best: Candidate | None
    seq: int

    def prediction(self, c: Candidate) -> Prediction | None:
        """The calibrated model's step for a compiled candidate, or an estimated one's."""
        gen = self.target.shape.generation
        if c.fits and c.report is not None:
            flags = self.job_flags if c is self.given else self.flags
            terms, flops = step_terms(c.report, gen, flags), c.report.flops
        elif c.estimated_terms:
            terms, flops = c.estimated_terms, c.estimated_flops
        else:
            return None
        step = self.model.predict(terms)
        return Prediction(
            step,
            c.batch * self.seq / step,
            flops / (gen.per_device(gen.peak_bf16_tflops) * 1e12) / step,
        )

    def predicted(self, c: Candidate) -> Prediction:
        """The prediction of a candidate that has one (compiled and fitting, or estimated)."""
        p = self.prediction(c)
        assert p is not None, f"{c.name} has no prediction"
        return p

    def speed(self, c: Candidate) -> float:
        """Predicted tokens/s per chip (or device); 0 for a candidate without a prediction."""
        p = self.prediction(c)
        return p.tokens_per_chip_s if p else 0.0

    def global_batch(self, c: Candidate) -> float:
        return c.batch * self.target.num_devices


def _parallel(n: int) -> int:
    """How many compiles run at once: one per COMPILE_THREADS cores, as host memory allows.
    More only share the cores: on 2 cores two 8B compiles side by side took 252 and 338 s
    where each alone takes 130 s."""
    try:
        gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / GIB
    except (ValueError, OSError):
        gib = COMPILE_GIB
    cores = (os.cpu_count() or 1) // COMPILE_THREADS
    return max(1, min(n, cores, int(gib // COMPILE_GIB)))


@dataclass
class Progress:
    """How far the advice's compiles are, as one line per event: a bar of those done against
    the most there can be (fewer when estimates show the rest cannot win), and what runs."""

    log: Callable[[str], None]
    planned: int  # the most compiles this advice can make
    done: int = 0
    WIDTH = 20
    _lock: threading.Lock = field(default_factory=threading.Lock)  # compiles end in a pool

    def say(self, what: str) -> None:
        filled = self.WIDTH * self.done // max(self.planned, 1)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.log(f"advice [{bar}] {self.done}/{self.planned} compiles: {what}")

    def finished(self, what: str) -> None:
        with self._lock:
            self.done += 1
            self.say(what)

    def fewer(self, n: int) -> None:
        """`n` compiles that were possible will not be made."""
        self.planned = max(self.done, self.planned - n)


def _compile_all(
    cands: list[Candidate],
    job: MaxTextArgs,
    target: TpuSlices,
    flags: str,
    use_cache: bool,
    progress: Progress,
) -> None:
    def one(c: Candidate) -> None:
        progress.say(f"compiling {c.name}")
        try:
            c.report = compile_report(
                c.args(job, target.num_slices), target, use_cache=use_cache, libtpu_flags=flags
            )
        except CompileError as e:  # one candidate MaxText cannot build does not stop the others
            c.failed = e.cause
        progress.finished(f"compiled {c.name}: " + (c.failed[:80] or _fit_word(c)))

    if not cands:
        return
    with ThreadPoolExecutor(_parallel(len(cands))) as pool:
        list(pool.map(one, cands))


def _fit_word(c: Candidate) -> str:
    if not c.report:
        return "-"
    cached = " (cached)" if "cached: " in c.report.note else ""
    fit = "fits" if c.report.fits else "does NOT fit"
    return f"{c.report.total_gib:.1f} GiB, {fit}{cached}"


def _estimate(probe: Candidate, remat: str, batch: float, target: TpuSlices) -> Candidate | None:
    """The candidate at (remat, batch) extrapolated from its split's probe, or None when it
    would not fit with the margin."""
    r = probe.report
    assert r is not None and r.model_dims
    dims = ModelDims(**r.model_dims)
    scale = batch / probe.batch
    # The probe (remat full) keeps only layer inputs: its temporaries grow with the batch; the
    # policy keeps more per token on top.
    new = dims.with_job(remat, batch)
    gib = r.arguments_gib + r.temporaries_gib * scale + new.kept_bytes() / GIB
    if gib > r.hbm_gib * (1 - HBM_MARGIN):
        return None
    gen = target.shape.generation
    tensor = probe.split.get("ici_tensor_parallelism", 1)
    flops = r.flops * scale
    compute = (flops + new.remat_flops()) / (gen.per_device(gen.peak_bf16_tflops) * 1e12)
    probe_terms = step_terms(r, gen, "")
    terms = StepTerms(
        compute_s=compute,
        hbm_s=probe_terms.hbm_s * scale,
        # fsdp moves weights (the same at any batch); tensor parallelism moves activations
        ici_s=probe_terms.ici_s * (scale if tensor > 1 else 1.0),
        overlapped=True,
        generation=gen.name,
    )
    return Candidate(
        probe.split, remat, batch, estimated_gib=gib, estimated_terms=terms, estimated_flops=flops
    )


def advise(
    args: MaxTextArgs,
    target: TpuSlices,
    use_cache: bool = True,
    log=print,
    given: MemoryReport | None = None,
    job_flags: str = "",
    max_batch: int | None = None,
) -> Advice:
    """Probes, estimates, compiles the best estimates; returns everything for `render`.
    `given` is the job's own report (compiled with `job_flags`); batches above `max_batch`
    are not tried."""
    gen = target.shape.generation
    model = calibrated_model()
    flags = generation_flags(gen.name)
    batch0 = float(args.get("per_device_batch_size"))
    batches = [b for b in BATCHES if max_batch is None or b <= max_batch]
    seq = int(args.get("max_target_length"))
    own_split = resolved_split(args.parallelism("ici"), target.devices_per_slice)
    own = Candidate(own_split, str(args.get("remat_policy")), batch0, report=given)
    probes = [Candidate(s, "full", batch0, probe=True) for s in candidate_splits(target.shape)]
    # At most: the job, the probes, each final and a smaller batch of it.
    progress = Progress(log, (given is None) + len(probes) + 2 * FINAL_COMPILES)
    if given is None:
        _compile_all([own], args, target, job_flags, use_cache, progress)
    _compile_all(probes, args, target, flags, use_cache, progress)
    advice = Advice(target, args, job_flags, flags, model, own, list(probes), None, seq)

    estimates: list[Candidate] = []
    for probe in probes:
        if not (probe.fits and probe.report is not None and probe.report.model_dims):
            continue
        for remat in POLICIES:
            fitting = [
                c
                for b in sorted({*batches, batch0})
                if (c := _estimate(probe, remat, b, target)) is not None
            ]
            estimates += fitting[-2:]  # the largest batch that fits, and the one below it
    compiled = {c.key for c in probes}
    estimates = [c for c in estimates if c.key not in compiled]
    estimates.sort(key=lambda c: -advice.speed(c))

    # The best estimates, compiled one at a time (a compile takes both cores by itself), while
    # one could beat the best compiled candidate: by its estimate with the margin, and at its
    # compute bound (the model's other terms at zero).
    best_so_far = max((advice.speed(c) for c in probes if c.fits), default=0.0)
    weight = model.compute_weight(gen.name)
    finals: list[Candidate] = []
    for c in estimates:
        if len({f.key[:2] for f in finals}) == FINAL_COMPILES:
            break
        if advice.speed(c) * (1 + ESTIMATE_MARGIN) <= best_so_far:
            break  # and every estimate after it: they are sorted
        assert c.estimated_terms is not None  # an estimate has its terms
        if c.batch * seq / (weight * c.estimated_terms.compute_s) <= best_so_far:
            continue
        if any(f.key[:2] == c.key[:2] for f in finals):  # its split and remat were compiled
            continue
        final = Candidate(c.split, c.remat, c.batch)
        _compile_all([final], args, target, flags, use_cache, progress)
        finals.append(final)
        smaller = [b for b in batches if b < final.batch]
        retry = Candidate(c.split, c.remat, smaller[-1]) if smaller else None
        # The estimate was optimistic: one batch smaller, unless that is a probe.
        if final.report and not final.report.fits and retry and retry.key not in compiled:
            _compile_all([retry], args, target, flags, use_cache, progress)
            finals.append(retry)
        else:
            progress.fewer(1)  # no smaller batch compiled for this one
        best_so_far = max(best_so_far, *(advice.speed(f) for f in finals))
    progress.planned = progress.done
    progress.say("done")
    advice.candidates = [*probes, *finals]
    fitting = [c for c in advice.candidates if c.fits]
    advice.best = max(fitting, key=advice.speed, default=None)
    advice.candidates += [c for c in estimates if c.key not in {k.key for k in advice.candidates}]
    return advice
