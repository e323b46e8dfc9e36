"""Golden renders: the chart rendered with each values file, as reviewers read it.

    python -m tests.support.goldens --write   (make goldens)

One file per values file under tests/chart/goldens/; nothing in a render is random (the Ray
token's Secret is KubeRay's), so a golden changes only when a template or a values file does.
tests/chart/test_goldens.py fails on any difference and prints it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.helm import BUCKET, CHART, VALUES_FILES, run_helm
from harness.paths import REPO

GOLDENS = REPO / "tests" / "chart" / "goldens"
RELEASE, NAMESPACE = "tpu", "ml"


def golden_path(values: Path) -> Path:
    return GOLDENS / values.name


def render_golden(values: Path) -> str:
    proc = run_helm(
        3, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(values), *BUCKET
    )
    if proc.returncode:
        raise RuntimeError(f"helm template failed for {values}:\n{proc.stderr}")
    header = (
        f"# Golden render of charts/tpu-stack with {values.relative_to(REPO)} "
        f"(release {RELEASE}, namespace {NAMESPACE}).\n# Regenerate: make goldens\n"
    )
    return header + proc.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the goldens")
    args = parser.parse_args(argv)
    GOLDENS.mkdir(parents=True, exist_ok=True)
    stale = []
    for values in VALUES_FILES:
        text, path = render_golden(values), golden_path(values)
        if args.write:
            path.write_text(text)
        elif not path.is_file() or path.read_text() != text:
            stale.append(path)
    for path in sorted(set(GOLDENS.glob("*.yaml")) - {golden_path(v) for v in VALUES_FILES}):
        if args.write:
            path.unlink()  # its values file is gone
        else:
            stale.append(path)
    for path in stale:
        print(f"{path.relative_to(REPO)} is stale: run `make goldens`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
