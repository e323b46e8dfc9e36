#!/usr/bin/env python3
"""The sharding advice's step-time model against published, measured runs.

Compiles every run of launcher/preflight/data/calibration_runs.json ahead of time for its slice
(preflight's compile, cached), fits the model to all of them, and prints, per run: the measured
step time, the calibrated prediction (and the one with the run itself left out of the fit), the
roofline bound the advice used before, and the error of each. Target: every calibrated
prediction within +-25% of the measurement.

    .venv/bin/python benchmarks/advice_calibration.py            # compile (or cache), compare
    .venv/bin/python benchmarks/advice_calibration.py --record   # and write the terms to the file

Without --record it also says where a fresh compile differs from the recorded terms (a new
MaxText or libtpu), which is when to record again.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from importlib import metadata

from launcher.preflight.calibration import RECORDED, load_runs, record_terms
from launcher.preflight.compile_engine import compile_report
from launcher.preflight.step_model import fit

TARGET = 0.25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--record", action="store_true", help="write the compiled terms")
    parser.add_argument("--no-cache", action="store_true", help="compile even when cached")
    options = parser.parse_args()

    runs = load_runs()
    versions = {p: metadata.version(p) for p in ("maxtext", "jax", "libtpu")}
    fresh, started = {}, time.monotonic()
    for i, run in enumerate(runs, 1):
        print(f"compiling {i}/{len(runs)}: {run.name} on {run.slice} ...", flush=True)
        report = compile_report(
            run.maxtext_args(),
            run.target,
            use_cache=not options.no_cache,
            libtpu_flags=run.libtpu_flags,
        )
        if not report.fits or not report.flops:  # said, and left out of the fit
            print(f"  left out: {report.render()}")
            continue
        fresh[run.name] = {k: v for k, v in asdict(report).items() if k in RECORDED}
        if run.terms and any(
            abs(fresh[run.name][k] - run.terms.get(k, 0)) > 0.01 * abs(fresh[run.name][k])
            for k in RECORDED
        ):
            print(f"  differs from the recorded terms (recorded with {run.terms.get('versions')})")
    compile_s = time.monotonic() - started
    if options.record:
        record_terms({name: {**t, "versions": versions} for name, t in fresh.items()})

    points = []
    for run in (r for r in runs if r.name in fresh):
        report = run.report(fresh[run.name])
        points.append((run, run.step_terms(report), run.measured_step_s(report.flops)))
    model = fit([(terms, measured) for _, terms, measured in points])

    print(f"\nstep-time model fitted to {len(points)} published runs: {model.describe()}")
    print(
        f"{'run':<38}{'slice':>10}{'measured':>10}{'model':>9}{'error':>8}"
        f"{'left out':>10}{'error':>8}{'roofline':>10}{'error':>8}  bound"
    )
    worst, worst_loo = 0.0, 0.0
    for i, (run, terms, measured) in enumerate(points):
        predicted = model.predict(terms)
        others = [(t, m) for j, (_, t, m) in enumerate(points) if j != i]
        left_out = fit(others).predict(terms)
        err, err_loo = predicted / measured - 1, left_out / measured - 1
        worst, worst_loo = max(worst, abs(err)), max(worst_loo, abs(err_loo))
        roof = terms.roofline_s
        bound = max((terms.compute_s, "compute"), (terms.hbm_s, "HBM"), (terms.ici_s, "ICI"))[1]
        print(
            f"{run.name:<38}{run.slice:>10}{measured:>9.3f}s{predicted:>8.3f}s{err:>+8.0%}"
            f"{left_out:>9.3f}s{err_loo:>+8.0%}{roof:>9.3f}s{roof / measured - 1:>+8.0%}  {bound}"
        )
    print("\nsources:")
    for run in runs:
        print(f"  {run.name}: {run.source['where']}\n    {run.source['figure']}")
    print(
        f"\ncompiles: {compile_s:.0f} s; versions {versions}\n"
        f"worst error: calibrated {worst:.0%} (target <= {TARGET:.0%}: "
        f"{'ok' if worst <= TARGET else 'MISSED'}), with the run left out of the fit "
        f"{worst_loo:.0%}"
    )


if __name__ == "__main__":
    main()
