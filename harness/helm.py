"""Run the pinned helm binaries (built by ci/install-helm.sh) on the chart."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

import yaml

from harness.paths import REPO, pins

CHART = REPO / "charts" / "tpu-stack"
VALUES = REPO / "values"
VALUES_FILES = sorted(VALUES.glob("*.yaml"))
BUCKET = ["--set", "global.gcsfuse.bucketName=ckpt-bucket"]


@cache
def helm(major: int) -> Path:
    version = pins()[f"HELM{major}_VERSION"]
    subprocess.run([str(REPO / "ci" / "install-helm.sh"), version], check=True, capture_output=True)
    return REPO / ".tools" / f"helm-{version}" / "helm"


def run_helm(major: int, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(helm(major)), *args], capture_output=True, text=True)


def render(values: Path | None = None, *sets: str, major: int = 3) -> list[dict]:
    args = ["template", "tpu", str(CHART), "--namespace", "ml"]
    if values:
        args += ["-f", str(values)]
    proc = run_helm(major, *args, *BUCKET, *sets)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def refused(*sets: str, values: Path | None = None, major: int = 3) -> str:
    """helm template's error output for values the chart must refuse."""
    args = ["template", str(CHART)]
    if "--name-template" not in sets:
        args.insert(1, "tpu")
    if values:
        args += ["-f", str(values)]
    proc = run_helm(major, *args, *sets)
    assert proc.returncode != 0, f"accepted {sets}"
    return proc.stderr


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]
