"""The launcher image: its Dockerfile lints clean, its lock matches the declared dependencies,
and its install steps, replayed here in a fresh venv from the lock, give a working launcher.
(No Docker engine runs here, so the image itself is not built; see the README.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import venv

import pytest

from tests.support.helm import pins
from tests.support.paths import REPO

pytestmark = pytest.mark.image
DOCKERFILE = REPO / "images" / "launcher" / "Dockerfile"
LOCK = REPO / "images" / "launcher" / "requirements.lock"


def _uv() -> str:
    """The pinned uv that `make venv` installs (a uv on PATH may be another version, or a pyenv
    shim that fails outside the Python it was installed for)."""
    uv = REPO / ".tools" / f"uv-{pins()['UV_VERSION']}" / "bin" / "uv"
    assert uv.is_file(), f"{uv} not found: run `make venv`"
    return str(uv)


def test_hadolint_reports_nothing():
    hadolint = shutil.which("hadolint", path=str(REPO / ".venv" / "bin"))
    assert hadolint, "hadolint not installed: run `make venv`"
    proc = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_image_runs_as_non_root_and_installs_the_lock_with_hashes():
    text = DOCKERFILE.read_text()
    assert re.search(r"^USER 1000$", text, re.M)
    assert "--require-hashes -r /app/requirements.lock" in text
    assert re.search(r"^ARG RAY_IMAGE=rayproject/ray:2\.60\.0-py312", text, re.M)
    assert "ray==2.60.0" in LOCK.read_text()  # the base image's Ray is the locked Ray


def test_lock_matches_the_declared_dependencies(tmp_path):
    """Re-resolving pyproject.toml at the lock's pins changes nothing (`make lock` was run)."""
    out = tmp_path / "requirements.lock"
    shutil.copy(LOCK, out)
    proc = subprocess.run(
        [_uv(), "pip", "compile", "--quiet", "pyproject.toml", "--python-version", "3.12",
         "--python-platform", "x86_64-manylinux_2_31", "--generate-hashes", "-o", str(out)],
        cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    pins = lambda p: sorted(re.findall(r"^([a-z0-9_.-]+==\S+)", p.read_text(), re.M))  # noqa: E731
    assert pins(out) == pins(LOCK), "images/launcher/requirements.lock is stale: run `make lock`"


def test_install_steps_from_the_lock_give_a_working_launcher(tmp_path):
    """What the Dockerfile's RUN steps do, in a fresh venv: the lock, then the launcher."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = str(env_dir / "bin" / "python")
    for argv in ([_uv(), "pip", "sync", "--quiet", "--python", python, str(LOCK)],
                 [_uv(), "pip", "install", "--quiet", "--python", python, "--no-deps", str(REPO)]):
        proc = subprocess.run(argv, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    helped = subprocess.run([python, "-m", "launcher.train", "--help"], capture_output=True,
                            text=True, cwd=tmp_path)
    # absl prints usage and exits 1 for --help; the usage text is what shows the app starts.
    assert "--accelerator_type" in helped.stdout and "Traceback" not in helped.stderr
    imported = subprocess.run(
        [python, "-c", "import maxtext, launcher.train; from maxtext.trainers.pre_train import "
         "train; print(train.main.__module__)"],
        capture_output=True, text=True, cwd=tmp_path, env={"JAX_PLATFORMS": "cpu"})
    assert imported.returncode == 0, imported.stderr
    assert "maxtext.trainers.pre_train.train" in imported.stdout
    assert sys.version_info[:2] == (3, 12)
