"""Sharding advice: which ICI split of a slice should this job use?

Compiles the job ahead of time for each candidate split (fsdp only, fsdp x tensor, data x fsdp;
across slices, data parallelism over DCN), drops those that do not fit in HBM, and ranks the rest
by a roofline estimate of one step per chip:

    compute = MaxText's analytic training FLOPs / the chip's peak bf16 FLOP/s
    memory  = HBM bytes (XLA's rule, every loop trip counted) / HBM bandwidth
    network = collective bytes of the compiled step / ICI bandwidth
    step   >= max(compute, memory, network)   (perfect overlap: a lower bound)

All chip figures come from the TPU table. It is an estimate: real steps also pay for what does
not overlap, for DCN, and for kernels slower than the roofline.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from math import prod

from launcher.core.errors import UsageError
from launcher.core.maxtext_args import MaxTextArgs
from launcher.core.slices import Slices
from launcher.preflight.compile_engine import compile_report
from launcher.preflight.memory_report import MemoryReport


@dataclass
class Candidate:
    split: dict[str, int]  # ici_*_parallelism overrides (the others are set to 1)
    report: MemoryReport | None = None
    failed: str = ""  # why it did not compile

    @property
    def name(self) -> str:
        shown = [
            f"{k.removeprefix('ici_').removesuffix('_parallelism')}={v}"
            for k, v in self.split.items()
            if v != 1
        ]
        return " x ".join(shown) or "none"


def candidate_splits(topology: str, chips_per_host: int) -> list[dict[str, int]]:
    """Every split of the slice's physical torus axes over data, fsdp and tensor that MaxText
    can lay out (each logical axis a product of whole physical axes), with fsdp > 1 (without it
    every chip holds all parameters) and tensor within a host. fsdp-only comes first."""
    dims = [int(d) for d in topology.split("x") if int(d) > 1]
    splits: list[dict[str, int]] = []
    for assignment in itertools.product(("data", "fsdp", "tensor"), repeat=len(dims)):
        sizes = {
            axis: prod(d for d, a in zip(dims, assignment, strict=True) if a == axis)
            for axis in ("data", "fsdp", "tensor")
        }
        split = {f"ici_{axis}_parallelism": n for axis, n in sizes.items() if n > 1}
        if sizes["fsdp"] > 1 and sizes["tensor"] <= chips_per_host and split not in splits:
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


@dataclass
class Estimate:
    compute_s: float
    memory_s: float
    network_s: float

    @property
    def step_s(self) -> float:
        return max(self.compute_s, self.memory_s, self.network_s)

    @property
    def bound(self) -> str:
        return max((self.compute_s, "compute"), (self.memory_s, "HBM"), (self.network_s, "ICI"))[1]

    @property
    def mfu(self) -> float:
        return self.compute_s / self.step_s if self.step_s else 0.0


def estimate(report: MemoryReport, target: Slices) -> Estimate:
    gen = target.shape.generation
    return Estimate(
        compute_s=report.flops / (gen.peak_bf16_tflops * 1e12),
        memory_s=report.hbm_bytes / (gen.hbm_gbps * 1e9),
        network_s=report.ici_bytes / (gen.ici_gbps / 8 * 1e9),
    )


def advise(
    args: MaxTextArgs,
    target: Slices,
    use_cache: bool = True,
    log=print,
    given: MemoryReport | None = None,
) -> tuple[list[Candidate], Candidate | None]:
    """Compiles every candidate (cached like preflight); returns them and the recommended one.
    `given` is the job's own report: the candidate equal to the job's split reuses it."""
    assert target.shape is not None
    candidates = [
        Candidate(s) for s in candidate_splits(target.shape.topology, target.shape.chips_per_host)
    ]
    own = {k: v for k, v in args.parallelism("ici").items() if v != 1}
    for i, cand in enumerate(candidates, 1):
        if given is not None and cand.split == own:
            cand.report = given
            continue
        log(f"advice: compiling {i}/{len(candidates)}: {cand.name} ...")
        try:
            cand.report = compile_report(
                with_split(args, cand.split, target.num_slices), target, use_cache=use_cache
            )
        except UsageError as e:  # one split MaxText cannot build does not stop the others
            lines = e.problem.splitlines()
            last_error = next((ln.strip() for ln in reversed(lines) if "Error" in ln), lines[-1])
            cand.failed = last_error[:160]
    fitting = [c for c in candidates if c.report and c.report.fits and c.report.flops]
    best = min(fitting, key=lambda c: estimate(c.report, target).step_s, default=None)
    return candidates, best


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.2f}ms" if ms < 10 else f"{ms:.0f}ms"


def render(candidates: list[Candidate], best: Candidate | None, target: Slices) -> str:
    gen = target.shape.generation
    lines = [
        f"sharding advice for {target.describe()}: roofline ESTIMATE per chip and step "
        f"(peak {gen.peak_bf16_tflops:g} TFLOP/s bf16, HBM {gen.hbm_gbps:g} GB/s, "
        f"ICI {gen.ici_gbps:g} Gbit/s; from the TPU table)",
        f"  {'ICI split':<22}{'memory/chip':>12}{'fits':>6}{'compute':>10}{'HBM':>9}"
        f"{'ICI':>9}{'step >=':>10}{'bound':>9}{'MFU <=':>8}",
    ]
    ranked = sorted(
        candidates,
        key=lambda c: (
            not (c.report and c.report.fits),
            estimate(c.report, target).step_s if c.report else 0,
        ),
    )
    for c in ranked:
        r = c.report
        mem = (f"{r.total_gib:.2f} GiB" if r and r.total_gib else "OOM") if r else "-"
        if r and r.fits and r.flops:
            e = estimate(r, target)
            cols = (
                f"{_ms(e.compute_s):>10}{_ms(e.memory_s):>9}{_ms(e.network_s):>9}"
                f"{_ms(e.step_s):>10}{e.bound:>9}{e.mfu:8.0%}"
            )
        elif c.failed:
            cols = f"  did not compile: {c.failed}"
        else:
            cols = ""
        mark = "  <- recommended" if c is best else ""
        lines.append(f"  {c.name:<22}{mem:>12}{'yes' if r and r.fits else 'no':>6}{cols}{mark}")
    if best:
        lines.append(
            "  recommended: "
            + " ".join(f"{k}={v}" for k, v in best.split.items())
            + (f" dcn_data_parallelism={target.num_slices}" if target.num_slices > 1 else "")
        )
    else:
        lines.append("  no candidate split fits: see the preflight's knobs (batch, remat, slice)")
    lines.append(
        "  This is an estimate from the compiled program and the chip's peak figures, "
        "not a measurement: real steps are slower (overlap is never perfect; DCN and "
        "slower kernels are not modelled). Measure the top two on the slice."
    )
    return "\n".join(lines)
