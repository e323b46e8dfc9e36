#!/usr/bin/env python3
"""What a training host spends importing MaxText's trainer at every start and restart, with
the modules it imports for options few jobs use (Vertex AI's SDK, scipy.stats) imported as
MaxText imports them and deferred to their first use, and torch (where installed beside JAX, as
in the tests' environment) imported or kept out (what the launcher's workers do:
launcher/core/maxtext/deferred_imports.py); and, deferred, without the bytecode `make venv` compiles
(a venv uv installs by default, where PYTHONDONTWRITEBYTECODE keeps Python from writing it at
the first import): side by side, fresh processes, alternating, median of N.

    .venv/bin/python benchmarks/worker_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from harness.paths import REPO
from launcher.core.maxtext.deferred_imports import DEFERRED, KEPT_OUT

IMPORT = "from maxtext.trainers.pre_train import train"
DEFER = (
    "from launcher.core.maxtext.deferred_imports import maxtext_imports\nwith maxtext_imports():\n"
)


def seconds_to_import(defer: bool, bytecode: bool = True) -> float:
    code = f"{DEFER}    {IMPORT}" if defer else IMPORT
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    with tempfile.TemporaryDirectory() as empty:
        if not bytecode:  # looked for (and not written) under an empty prefix: compiled each time
            env |= {"PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"}
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, env=env, check=True, capture_output=True
        )
        return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    seconds_to_import(defer=False)  # warm the file cache and bytecode for both
    eager, deferred, compiled = [], [], []
    for _ in range(runs):
        eager.append(seconds_to_import(defer=False))
        deferred.append(seconds_to_import(defer=True))
        compiled.append(seconds_to_import(defer=True, bytecode=False))
    e, d, c = (statistics.median(x) for x in (eager, deferred, compiled))
    print(f"importing MaxText's trainer in a fresh process (median of {runs}, one at a time):")
    print(f"  as MaxText imports it:      {e:6.1f}s  ({min(eager):.1f} .. {max(eager):.1f})")
    print(f"  {', '.join(DEFERRED)} deferred, {', '.join(KEPT_OUT)} kept out:")
    print(f"                              {d:6.1f}s  ({min(deferred):.1f} .. {max(deferred):.1f})")
    print(f"  the same, no bytecode:      {c:6.1f}s  ({min(compiled):.1f} .. {max(compiled):.1f})")
    print(f"  ratio deferred / eager: {d / e:.2f}; saved per host start: {e - d:.1f}s")
    print(f"  ratio bytecode / none: {d / c:.2f}; saved per host start: {c - d:.1f}s")


if __name__ == "__main__":
    main()
