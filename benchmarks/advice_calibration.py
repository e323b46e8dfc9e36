#!/usr/bin/env python3
"""The sharding advice's step-time model against published, measured runs.

Compiles every run of launcher/preflight/data/calibration_runs.json ahead of time for its slice
(preflight's compile, cached), fits the model to all of them but the test set, and prints, per
run: the measured step time, the calibrated prediction, the prediction by a fit that never saw
the run (a test run: the model itself; another: the fit with the run left out too), the roofline
bound the advice used before, and the error of each; then, per TPU generation and for the
multi-slice runs, the worst out-of-sample errors. Target: every out-of-sample error within
+-15%, or the run named with why not.

    .venv/bin/python benchmarks/advice_calibration.py            # compile (or cache), compare
    .venv/bin/python benchmarks/advice_calibration.py --record   # and write the terms to the file
    .venv/bin/python benchmarks/advice_calibration.py --recorded # the fit alone, no compile

Without --record it also says where a fresh compile differs from the recorded terms (a new
MaxText or libtpu), which is when to record again.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, replace
from importlib import metadata

from launcher.preflight.calibration import (
    RECORDED,
    fit_runs,
    held_out_set,
    load_runs,
    out_of_sample_errors,
    record_terms,
)
from launcher.preflight.compile_engine import compile_report

TARGET = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--record", action="store_true", help="write the compiled terms")
    parser.add_argument("--no-cache", action="store_true", help="compile even when cached")
    parser.add_argument(
        "--recorded", action="store_true", help="fit the recorded terms; compile only runs without"
    )
    options = parser.parse_args()

    runs = load_runs()
    versions = {p: metadata.version(p) for p in ("maxtext", "jax", "libtpu")}
    fresh: dict[str, dict] = {}
    refused: dict[str, str] = {}
    started = time.monotonic()
    for i, run in enumerate(runs, 1):
        if options.recorded and (run.terms or run.left_out):
            if run.terms:
                fresh[run.name] = {k: run.terms.get(k, 0.0) for k in RECORDED}
            else:
                print(f"left out: {run.name}: {run.left_out}")
            continue
        print(f"compiling {i}/{len(runs)}: {run.name} on {run.slice} ...", flush=True)
        report = compile_report(
            run.maxtext_args(),
            run.target,
            use_cache=not options.no_cache,
            libtpu_flags=run.libtpu_flags,
        )
        if not report.fits or not report.flops:  # said, and left out of the fit
            print(f"  left out: {report.render()}")
            refused[run.name] = (
                f"does not compile to a fitting program with maxtext {versions['maxtext']}, "
                f"libtpu {versions['libtpu']}: {report.note.split('; cached')[0]}"
            )
            continue
        fresh[run.name] = {k: v for k, v in asdict(report).items() if k in RECORDED}
        if run.terms and any(
            abs(fresh[run.name][k] - run.terms.get(k, 0)) > 0.01 * abs(fresh[run.name][k])
            for k in RECORDED
        ):
            print(f"  differs from the recorded terms (recorded with {run.terms.get('versions')})")
    compile_s = time.monotonic() - started
    if options.record:
        record_terms({name: {**t, "versions": versions} for name, t in fresh.items()}, refused)

    fitted = [replace(r, terms=fresh[r.name]) for r in runs if r.name in fresh]
    held_out = held_out_set(fitted)
    model = fit_runs([r for r in fitted if r.name not in held_out])
    outside = out_of_sample_errors(fitted)

    print(
        f"\nstep-time model fitted to {len(fitted) - len(held_out)} published runs "
        f"({len(held_out)} more held out as the test set): {model.describe()}"
    )
    print(
        f"{'run':<44}{'slice':>12}{'measured':>10}{'model':>9}{'error':>7}"
        f"{'unseen':>10}{'error':>7}{'roofline':>10}{'error':>7}  bound"
    )
    for run in fitted:
        terms, measured = run.step_terms(), run.measured_step_s()
        predicted = model.predict(terms)
        kind, err = outside[run.name]
        roof = terms.roofline_s
        bound = max((terms.compute_s, "compute"), (terms.hbm_s, "HBM"), (terms.ici_s, "ICI"))[1]
        where = run.slice + (f" x{run.num_slices}" if run.num_slices > 1 else "")
        print(
            f"{run.name:<44}{where:>12}{measured:>9.3f}s{predicted:>8.3f}s"
            f"{predicted / measured - 1:>+7.0%}{'test' if kind == 'test' else 'l.o.':>10}"
            f"{err:>+7.0%}{roof:>9.3f}s{roof / measured - 1:>+7.0%}  {bound}"
        )
    print("\nout of sample (l.o.: left out of the fit; test: never in it), worst |error|:")
    groups = [*sorted({r.generation for r in fitted}), "multi-slice"]
    missed = []
    for group in groups:
        members = [
            r
            for r in fitted
            if (r.num_slices > 1 if group == "multi-slice" else r.generation == group)
        ]
        for kind in ("left out", "test"):
            errs = {r.name: outside[r.name][1] for r in members if outside[r.name][0] == kind}
            if errs:
                worst = max(errs, key=lambda n: abs(errs[n]))
                worst_e = errs[worst]
                print(
                    f"  {group:<12} {kind:<9} {len(errs):>3} runs, worst {worst_e:+.0%} ({worst})"
                )
        missed += [r.name for r in members if abs(outside[r.name][1]) > TARGET]
    print("\nsources:")
    for run in runs:
        print(f"  {run.name}: {run.source['where']}\n    {run.source['figure']}")
    print(f"\ncompiles: {compile_s:.0f} s; versions {versions}")
    print(
        f"every out-of-sample error within {TARGET:.0%}: "
        + ("yes" if not missed else f"no: {', '.join(sorted(set(missed)))}")
    )


if __name__ == "__main__":
    main()
