"""The launcher image: its Dockerfile lints clean, its lock matches the declared dependencies,
and its install steps, replayed here in a fresh venv from the lock, give a working launcher.
(No Docker engine runs here, so the image itself is not built; see the README.)"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from harness.paths import REPO, pins
from launcher.core.job.frameworks import IMAGE_FRAMEWORK_ENV, JAX, TORCH
from launcher.core.runtime_door import RUNTIME_MODULE

pytestmark = pytest.mark.image
DOCKERFILE = REPO / "images" / "launcher" / "Dockerfile"
LOCK = REPO / "images" / "launcher" / JAX.lock
TORCH_LOCK = REPO / "images" / "launcher" / TORCH.lock  # the torch variant's


@contextmanager
def uv_cache_turn() -> Iterator[None]:
    """One uv command of the image tests at a time: an online one (the lock's re-resolve, the
    image's install steps) rewrites uv's cached index pages while an offline one (the client's
    install) reads them, and there the offline one found none (CI, two workers)."""
    with open(REPO / ".tools" / "uv-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


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
    assert '--require-hashes -r "${lock}"' in text
    # One image per framework (launcher.core.job.frameworks): its lock, and the image says which it
    # is, so a job of the other framework stops on the head.
    assert re.search(rf"^ARG FRAMEWORK={JAX.name}$", text, re.M)
    assert f"lock=/app/images/launcher/{JAX.lock} " in text
    assert (
        f'if [ "${{FRAMEWORK}}" = {TORCH.name} ]; then lock=/app/images/launcher/{TORCH.lock}; fi'
    ) in text
    assert f"{IMAGE_FRAMEWORK_ENV}=${{FRAMEWORK}}" in text
    assert {(DOCKERFILE.parent / f.lock).is_file() for f in (JAX, TORCH)} == {True}


EXCLUDED = DOCKERFILE.parent / "requirements-excluded.txt"


def _excluded() -> set[str]:
    lines = EXCLUDED.read_text().splitlines()
    return {ln.split(";")[0].strip() for ln in lines if ln and not ln.startswith("#")}


@pytest.mark.parametrize(
    ("extra", "lock", "overrides"),
    [("runtime", LOCK, ["--override", str(EXCLUDED)]), ("torch", TORCH_LOCK, [])],
)
def test_lock_matches_the_declared_dependencies(tmp_path, extra, lock, overrides):
    """Re-resolving pyproject.toml at the lock's pins changes nothing (`make lock` was run):
    the JAX image's lock (less MaxText's development tools), and the torch image's."""
    out = tmp_path / lock.name
    shutil.copy(lock, out)
    with uv_cache_turn():
        proc = subprocess.run(
            [
                _uv(),
                "pip",
                "compile",
                "--quiet",
                "pyproject.toml",
                "--extra",
                extra,
                "--python-version",
                "3.12",
                "--python-platform",
                "x86_64-manylinux_2_31",
                "--generate-hashes",
                *overrides,
                "-o",
                str(out),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
    assert proc.returncode == 0, proc.stderr
    pins = lambda p: sorted(re.findall(r"^([a-z0-9_.-]+==\S+)", p.read_text(), re.M))  # noqa: E731
    assert pins(out) == pins(lock), f"images/launcher/{lock.name} is stale: run `make lock`"


def test_the_jax_image_installs_none_of_maxtexts_development_tools():
    """pytest, pylint, black, pytype, pre-commit and what only they need: every host pulls
    the image, no host runs them (MaxText 0.2.5 lists them among its requirements)."""
    names = set(re.findall(r"^([a-z0-9_.-]+)==", LOCK.read_text(), re.M))
    assert {"pytest", "pylint", "black", "pytype", "pre-commit"} <= _excluded()
    assert not names & _excluded()
    assert {"maxtext", "jax", "ray"} <= names


def _build_wheel(out_dir, source=REPO) -> str:
    """The package's wheel built from `source` (a clone, or an image's build context)."""
    with uv_cache_turn():
        proc = subprocess.run(
            [_uv(), "build", "--wheel", "--quiet", "--out-dir", str(out_dir), str(source)],
            capture_output=True,
            text=True,
        )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out_dir.glob("tpu_launcher-*.whl")
    return str(wheel)


def test_the_wheel_carries_the_launchers_configs(tmp_path):
    with zipfile.ZipFile(_build_wheel(tmp_path)) as wheel:
        names = set(wheel.namelist())
    assert "launcher/configs/tiny-llama.yml" in names
    # `data prepare` with no source prepares the project's corpus, from the installed package.
    assert {f"launcher/corpus/tiny/notes-{i}.jsonl" for i in range(3)} <= names
    assert {
        "launcher/cli.py",
        "launcher/runtime/train/entrypoint.py",
        "launcher/core/tpu/table.py",
        "launcher/client/jobs/submit.py",
        "launcher/preflight/command.py",
    } <= names


def test_install_steps_from_the_lock_give_a_working_launcher(tmp_path):
    """What the Dockerfile's RUN steps do, in a fresh venv: the lock, then the launcher's built
    wheel (not the source tree, not editable); then the demo job's dry run from a directory
    that holds no source, so every file it needs comes from the installed wheel."""
    env_dir, outside = tmp_path / "venv", tmp_path / "elsewhere"
    outside.mkdir()
    venv.create(env_dir, with_pip=False)
    python = str(env_dir / "bin" / "python")
    wheel = _build_wheel(tmp_path)
    for argv in (
        [_uv(), "pip", "sync", "--quiet", "--python", python, str(LOCK)],
        [_uv(), "pip", "install", "--quiet", "--python", python, "--no-deps", wheel],
    ):
        with uv_cache_turn():
            proc = subprocess.run(argv, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    clean_env = {
        "PATH": f"{env_dir / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "JAX_PLATFORMS": "cpu",
        "LAUNCHER_OUTPUT_DIR": str(tmp_path),
    }
    door = [str(env_dir / "bin" / "python"), "-m", RUNTIME_MODULE]  # as the image's pods run it
    helped = subprocess.run(
        [*door, "train", "--help"],
        capture_output=True,
        text=True,
        cwd=outside,
        env=clean_env,
    )
    assert helped.returncode == 0 and "--accelerator_type" in helped.stdout, helped.stderr
    dry = subprocess.run(
        [
            *door,
            "train",
            "--dry_run",
            "--accelerator_type=v5p",
            "--topology=2x2x2",
            "--steps_beyond_checkpoint=40",
            "tiny-llama.yml",
            "run_name=demo",
        ],
        capture_output=True,
        text=True,
        cwd=outside,
        env=clean_env,
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    installed_config = f"{env_dir}/lib/python3.12/site-packages/launcher/configs/tiny-llama.yml"
    assert installed_config in dry.stdout, dry.stdout
    assert '"resources_per_worker": {"TPU": 4}' in dry.stdout
    imported = subprocess.run(
        [
            python,
            "-c",
            "import maxtext, launcher.runtime.train.worker; from maxtext.trainers.pre_train "
            "import train; print(train.main.__module__)",
        ],
        capture_output=True,
        text=True,
        cwd=outside,
        env=clean_env,
    )
    assert imported.returncode == 0, imported.stderr
    assert "maxtext.trainers.pre_train.train" in imported.stdout
    assert sys.version_info[:2] == (3, 12)
