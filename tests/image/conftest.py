"""The client as a user installs it, shared by the image tier's modules: the built wheel, and a
fresh virtual environment with the clone installed as the README says (`pip install .`: not
editable, no extras), run from a directory that holds no clone."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest

from harness.paths import REPO
from tests.image.test_image import _build_wheel, _uv, uv_cache_turn

DEV_LOCK = str(REPO / "images" / "launcher" / "requirements-dev.lock")
HELM = str(REPO / ".tools" / "helm-v3.22.0" / "helm")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    return Path(_build_wheel(tmp_path_factory.mktemp("wheel")))


def install_client(root: Path, requirement: str) -> tuple[Path, Path]:
    """(a fresh venv under `root` with `requirement` installed, a directory outside the clone).
    Its dependencies resolve at the tests' lock's versions (as constraints) and come from uv's
    cache, where the lock's sync put every wheel; the index is asked only for what the cache
    lacks."""
    env_dir, outside = root / "venv", root / "elsewhere"
    outside.mkdir()
    venv.create(env_dir, with_pip=False)
    with uv_cache_turn():
        proc = subprocess.run(
            [_uv(), "pip", "install", "--python", str(env_dir / "bin" / "python"),
             "--constraint", DEV_LOCK, requirement],
            capture_output=True,
            text=True,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return env_dir, outside


@pytest.fixture(scope="session")
def client(tmp_path_factory) -> tuple[Path, Path]:
    """The client as the README installs it: `pip install .` of the clone, not editable, no
    extras."""
    return install_client(tmp_path_factory.mktemp("client"), str(REPO))


def run_client(
    client,
    *argv: str,
    cwd: Path | None = None,
    python: str | None = None,
    env: dict | None = None,
    tool_dir: Path | None = None,
) -> subprocess.CompletedProcess:
    """`tpu-launcher ARGV` of the installed client, from outside the clone unless `cwd` says,
    with nothing on PATH but the venv (and `tool_dir`: fakes, helm) and the system's."""
    env_dir, outside = client
    command = [str(env_dir / "bin" / "tpu-launcher"), *argv]
    if python:  # another interpreter's venv with the client
        command = [python, "-m", "launcher", *argv]
    path = f"{env_dir / 'bin'}:/usr/bin:/bin"
    if tool_dir:
        path = f"{tool_dir}:{path}"
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=cwd or outside,
        env={"PATH": path, "HOME": str(outside), **(env or {})},
    )
