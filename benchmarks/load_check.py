"""The load check (not part of CI): the whole test suite while another process keeps one core
busy, as on a user's laptop or a shared CI runner, which are rarely idle.

    .venv/bin/python benchmarks/load_check.py              # bash .ci/run: make test, lone clone
    .venv/bin/python benchmarks/load_check.py -- make test-e2e test-preflight

Prints the command's wall time and pytest's summary line, and what of ours was left running
afterwards (Ray, compiles): nothing, when every owner ended what it started. It refuses to start
while something of ours runs already. docs/development.md holds the figures of one run.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import psutil

from harness.paths import REPO

BUSY = "while True: pass"  # one CPU-bound process: a core taken for the whole run
OURS = ("launcher.preflight.aot_probe", "raylet", "gcs_server", "launcher train")
SUMMARY = re.compile(r"=+ .*\d+ (passed|failed).* in [\d.]+s.* =+")


def leftovers() -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or [])
        if any(mark in line for mark in OURS):
            found.append(f"{proc.pid} {line[:100]}")
    return found


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1 :] if "--" in argv else ["bash", ".ci/run"]
    if before := leftovers():
        print("load check: processes of ours run already (`tpu-launcher down` stops a local")
        print("cluster); the check counts what the run leaves, so it starts from none:")
        print("\n".join(f"  {line}" for line in before))
        return 2
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    started = time.monotonic()
    lines: list[str] = []
    try:
        run = subprocess.Popen(
            command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert run.stdout is not None
        for line in run.stdout:  # shown as it comes: a run takes most of an hour
            sys.stdout.write(line)
            lines.append(line)
        code = run.wait()
    finally:
        busy.kill()
    wall = time.monotonic() - started
    summary = [ln.strip("= \n") for ln in lines if SUMMARY.search(ln)]
    left = leftovers()
    print(f"\nload check: `{' '.join(command)}` beside one busy core ({psutil.cpu_count()} cores)")
    print(f"  result: {summary[-1] if summary else 'no pytest summary'} (exit {code})")
    print(f"  wall time: {wall / 60:.1f} min")
    print(f"  left running of ours afterwards: {len(left)}")
    for line in left:
        print(f"    {line}")
    return code or (1 if left else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
