"""The sharding advice as printed: every candidate's predicted step, tokens/s and MFU beside
its memory, the recommendation, and the job's own arguments with it pasted in, ready to submit.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import fields

from launcher.core.job.plan import Job, JobOptions
from launcher.core.maxtext.value_types import typed
from launcher.core.tpu.table import device_noun
from launcher.preflight.calibration import errors_on
from launcher.preflight.sharding_advice import Advice, Candidate, plain_number

# What the advice prints before the job's arguments with the recommendation in them.
PASTE_HERE = "paste as the job's arguments (tpu-launcher submit|preflight ... -- <these>):"


def changed_args(advice: Advice, c: Candidate) -> dict[str, str]:
    """The MaxText arguments `c` changes in the job (values equal to the job's are left out)."""

    new = c.args(advice.job, advice.target.num_slices).overrides
    if advice.target.num_slices == 1:  # one slice: nothing goes over DCN
        new = {k: v for k, v in new.items() if not k.startswith("dcn_")}
    return {k: v for k, v in new.items() if typed(v) != advice.job.get(k)}


def paste_args(job: Job, changes: dict[str, str], libtpu_flags: str) -> str:
    """The job's arguments with `changes`, as one shell word list to paste after `--`:
    the launcher's flags (LIBTPU_INIT_ARGS as --libtpu_init_args), then MaxText's, in the
    user's order, changed in place or appended."""
    options = job.options
    defaults = JobOptions()
    launcher = [
        f"--{f.name}={getattr(options, f.name)}"
        for f in fields(JobOptions)
        if f.name != "libtpu_init_args" and getattr(options, f.name) != getattr(defaults, f.name)
    ]
    if libtpu_flags:
        launcher.append(f"--libtpu_init_args={libtpu_flags}")
    pending = dict(changes)
    maxtext = []
    for arg in job.maxtext_argv:
        key = arg.partition("=")[0]
        maxtext.append(f"{key}={pending.pop(key)}" if key in pending else arg)
    maxtext += [f"{k}={v}" for k, v in pending.items()]
    return shlex.join([*launcher, *maxtext])


def _seconds(s: float) -> str:
    """Three significant digits at least: a small model's step is a fraction of a millisecond."""
    if s >= 0.01:
        return f"{s:.3f}s" if s >= 0.1 else f"{s:.4f}s"
    ms = s * 1e3
    decimals = max(3, 2 - math.floor(math.log10(ms))) if ms > 0 else 3
    return f"{ms:.{decimals}f}ms"


def _row(advice: Advice, c: Candidate, label: str) -> str:
    p = advice.prediction(c)
    if c.report and not c.report.fits:
        memory, fits = f"{c.report.total_gib:.1f} GiB", "no"
    elif c.report:
        memory, fits = f"{c.report.total_gib:.1f} GiB", "yes"
    elif c.estimated_terms:
        memory, fits = f"~{c.estimated_gib:.1f} GiB", "est."
    else:
        memory, fits = "-", "-"
    cols = (
        f"{_seconds(p.step_s):>9}{p.tokens_per_chip_s:>12,.0f}{p.mfu:>6.0%}"
        if p
        else f"  {c.failed[:60] or 'does not fit'}"
    )
    return f"  {label:<40}{plain_number(advice.global_batch(c)):>7}{memory:>11}{fits:>6}{cols}"


def render(advice: Advice, job: Job) -> str:
    gen = advice.target.shape.generation
    per = device_noun(gen.devices_per_chip)
    given = advice.prediction(advice.given)
    lines = [
        f"sharding advice for {advice.target.describe()}: PREDICTED per {per} and step by the "
        f"step model calibrated on published runs ({advice.model.describe()}; peak "
        f"{gen.per_device(gen.peak_bf16_tflops):g} TFLOP/s, HBM "
        f"{gen.per_device(gen.hbm_gbps):g} GB/s, ICI {gen.per_device(gen.ici_gbps):g} Gbit/s "
        f"per {per} from the TPU table)",
        f"  candidates compiled with LIBTPU_INIT_ARGS={advice.flags or '(none)'}",
        f"  {f'candidate (split, remat, batch/{per})':<40}{'global':>7}{'memory':>11}{'fits':>6}"
        f"{'step':>9}{'tokens/s':>12}{'MFU':>6}",
        _row(advice, advice.given, f"the job as given: {advice.given.name}"),
    ]
    compiled = [c for c in advice.candidates if c.report or c.failed]
    ranked = sorted(
        compiled,
        key=lambda c: -(p.tokens_per_chip_s if (p := advice.prediction(c)) and c.fits else 0),
    )
    lines += [_row(advice, c, c.name + (" <- best" if c is advice.best else "")) for c in ranked]
    estimated = [c for c in advice.candidates if c.estimated_terms and not c.report]
    if estimated:
        lines.append(
            f"  estimated from the probes, not compiled ({len(estimated)}; only compiled "
            "candidates are recommended), best 3:"
        )
        lines += [_row(advice, c, c.name) for c in estimated[:3]]
    best = advice.best
    if best is None:
        lines.append("  no candidate fits: see the preflight's knobs (batch, remat, slice)")
        return "\n".join(lines)
    p = advice.predicted(best)
    ratio = ""
    if given:
        ratio = f", {p.tokens_per_chip_s / given.tokens_per_chip_s:.1f}x the job as given"
    errors = errors_on(gen.name)
    typical = sorted(abs(e) for e in errors.values())[len(errors) // 2] if errors else None
    within = f" (typically within {typical:.0%} on {gen.name} out of sample)" if errors else ""
    lines.append(
        f"  recommended: {best.name}: {_seconds(p.step_s)}/step, {p.tokens_per_chip_s:,.0f} "
        f"tokens/s/{per}{ratio}, MFU {p.mfu:.0%}{within}"
    )
    job_batch, new_batch = advice.global_batch(advice.given), advice.global_batch(best)
    changes = changed_args(advice, best)
    if new_batch != job_batch:
        keep = advice.given.batch / best.batch
        if keep > 1 and keep.is_integer():
            changes["gradient_accumulation_steps"] = plain_number(keep)
            lines.append(
                f"  global batch: kept at {plain_number(job_batch)} sequences by "
                f"gradient_accumulation_steps={plain_number(keep)} (in the arguments below)"
            )
        else:
            lines.append(
                f"  global batch CHANGES: {plain_number(new_batch)} sequences x {advice.seq} "
                f"tokens per step, the job's is {plain_number(job_batch)}: gradient accumulation "
                "cannot keep it (it only multiplies); retune the learning rate and warmup for it"
            )
            same = [
                c
                for c in compiled
                if c.fits and advice.global_batch(c) == job_batch and c is not best
            ]
            if same:
                b = max(same, key=advice.speed)
                q = advice.predicted(b)
                lines.append(
                    f"  at the job's own global batch the best is {b.name}: "
                    f"{q.tokens_per_chip_s:,.0f} tokens/s/{per}:\n    "
                    + paste_args(job, changed_args(advice, b), advice.flags)
                )
    lines.append(f"  {PASTE_HERE}\n    " + paste_args(job, changes, advice.flags))
    if errors:
        worst = max(errors, key=lambda n: abs(errors[n]))
        lines.append(
            f"  on {gen.name} the model's error out of sample (each of its {len(errors)} "
            f"published runs predicted by a fit that did not see it): typically {typical:.0%}, "
            f"at worst {errors[worst]:+.0%} ({worst}; negative: slower than predicted)"
        )
    else:
        lines.append(
            f"  NOT CALIBRATED on {gen.name}: no published MaxText run on it with its arguments "
            f"is recorded, so its compute weight is the one fitted to the other generations "
            f"({advice.model.compute:.2f}); the ranking holds better than the step times"
        )
    lines.append(
        "  A prediction from the compiled program and published measurements, not a "
        "measurement: benchmarks/advice_calibration.py prints how far the model was from each "
        "published run. Measure the recommendation on the slice before a long run."
    )
    return "\n".join(lines)
