"""The client as a user installs it: the built wheel, without extras, in a fresh virtual
environment, run from a directory that holds no clone. It installs no training stack, carries
its chart at its own version, plans and dry-runs an install, and says what to do where a
command needs the training stack. Its dependencies resolve at the tests' lock's versions (as
constraints) and come from uv's cache, where the lock's sync put every wheel; the index is asked
only for what the cache lacks (`--offline` cannot resolve from a cache that a sync alone filled:
uv keeps the wheels' metadata only after a resolve, and on a fresh machine the client's install
ran before the image tests' re-resolve of the lock)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import yaml

from harness.paths import REPO
from tests.image.test_image import _build_wheel, _uv, uv_cache_turn

pytestmark = pytest.mark.image
TRAINING_STACK = {"jax", "jaxlib", "libtpu", "maxtext", "ray", "tensorflow", "torch"}
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]
MAXTEXT = next(r for r in PROJECT["optional-dependencies"]["preflight"] if "maxtext" in r)
MAXTEXT_PIN = "maxtext==" + MAXTEXT.partition("==")[2]  # the pyproject's pin, without extras
DEV_LOCK = str(REPO / "images" / "launcher" / "requirements-dev.lock")


def _requirement_name(line: str) -> str:
    return re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0].lower()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return Path(_build_wheel(tmp_path_factory.mktemp("wheel")))


@pytest.fixture(scope="module")
def client(wheel, tmp_path_factory) -> tuple[Path, Path]:
    """(the venv, a directory outside the clone) with the wheel installed, no extras."""
    root = tmp_path_factory.mktemp("client")
    env_dir, outside = root / "venv", root / "elsewhere"
    outside.mkdir()
    venv.create(env_dir, with_pip=False)
    with uv_cache_turn():
        proc = subprocess.run(
            [_uv(), "pip", "install", "--python", str(env_dir / "bin" / "python"),
             "--constraint", DEV_LOCK, wheel],
            capture_output=True,
            text=True,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return env_dir, outside


def _run(client, *argv: str, python: str | None = None, env: dict | None = None):
    env_dir, outside = client
    command = [str(env_dir / "bin" / "tpu-launcher"), *argv]
    if python:  # the installed client's modules under another interpreter
        command = [python, "-m", "launcher", *argv]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=outside,
        env={"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "HOME": str(outside), **(env or {})},
    )


def test_the_wheel_is_one_for_every_platform_without_the_training_stack(wheel):
    assert wheel.name == f"tpu_launcher-{VERSION}-py3-none-any.whl"  # pure Python: any OS, CPU
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = Parser().parsestr(zf.read(f"tpu_launcher-{VERSION}.dist-info/METADATA").decode())
        chart = yaml.safe_load(zf.read("launcher/chart/Chart.yaml"))
    base = {_requirement_name(r) for r in meta.get_all("Requires-Dist") if "extra ==" not in r}
    assert base and not base & TRAINING_STACK, base
    extras = {_requirement_name(r) for r in meta.get_all("Requires-Dist") if "extra ==" in r}
    assert {"maxtext", "ray"} <= extras
    assert meta["Requires-Python"] == ">=3.11"
    classifiers = meta.get_all("Classifier")
    assert {"Operating System :: MacOS", "Operating System :: POSIX :: Linux"} <= set(classifiers)
    # The chart inside, at the package's version (one version for package, chart and image).
    assert chart["version"] == chart["appVersion"] == VERSION
    assert {"launcher/chart/values.schema.json", "launcher/chart/files/tpu-table.json"} <= names
    assert not any("__pycache__" in n for n in names)


def test_installing_it_brings_no_training_stack(client):
    env_dir, _ = client
    listed = subprocess.run(
        [_uv(), "pip", "list", "--python", str(env_dir / "bin" / "python"), "--format=freeze"],
        capture_output=True,
        text=True,
    )
    installed = {_requirement_name(line) for line in listed.stdout.splitlines()}
    assert "tpu-launcher" in installed and not installed & TRAINING_STACK, installed
    assert _run(client, "--version").stdout.strip() == f"tpu-launcher {VERSION}"
    helped = _run(client, "list", "--help")
    assert helped.returncode == 0 and "--json" in helped.stdout, helped.stderr


HELM = str(REPO / ".tools" / "helm-v3.22.0" / "helm")
TARGET = ["--project", "p", "--cluster", "c", "--location", "us-east5-b", "--bucket", "ckpt-bucket"]


def _pinned_values(client) -> str:
    values = client[1] / "v6e-16-pinned.yaml"
    text = (REPO / "values" / "v6e-16.yaml").read_text()
    values.write_text(text + "\n" + yaml.safe_dump({"ray": {"image": {"tag": "0.1.0-abc"}}}))
    return str(values)


def test_gke_plan_and_install_from_outside_the_clone(client):
    """The chart comes from the package; with no checkout to build the image from, the plan
    checks that the pinned image is in the registry instead of building it."""
    plan = _run(client, "gke", "plan", "-f", _pinned_values(client), *TARGET, "--helm", HELM)
    assert plan.returncode == 0, plan.stderr
    image = "us-east5-docker.pkg.dev/p/tpu-stack/launcher:0.1.0-abc"
    assert f"gcloud artifacts docker images describe {image}" in plan.stdout, plan.stdout
    assert "builds submit" not in plan.stdout
    assert "gcloud container clusters create c" in plan.stdout
    install = _run(
        client, "install", "--dry-run", "-f", _pinned_values(client), *TARGET, "--helm", HELM
    )
    assert install.returncode == 0, install.stderr
    assert re.search(r"upgrade --install tpu \S+/site-packages/launcher/chart ", install.stdout)
    # The release pins the digest the registry holds for the tag, read before Helm runs.
    assert f"gcloud artifacts docker images describe {image}" in install.stdout
    assert "--set 'ray.image.digest=<the digest gcloud prints>'" in install.stdout


def test_the_packaged_chart_packages_at_the_packages_version(client, tmp_path):
    """What a platform team pushes to its registry (`helm package`, `helm push`): the chart the
    client carries, versioned as the client is."""
    (chart,) = client[0].glob("lib/python3.12/site-packages/launcher/chart")
    proc = subprocess.run(
        [HELM, "package", str(chart), "--destination", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.glob("*.tgz")] == [f"tpu-stack-{VERSION}.tgz"]


def test_an_unpinned_image_outside_the_clone_is_refused_with_the_fix(client):
    plan = _run(client, "gke", "plan", "-f", str(REPO / "values" / "v6e-16.yaml"), *TARGET)
    assert plan.returncode == 2, plan.stdout + plan.stderr
    assert "ray.image.tag" in plan.stderr and "fix: set ray.image.tag" in plan.stderr
    assert "Traceback" not in plan.stderr


def test_a_command_that_needs_the_training_stack_says_how_to_get_it(client):
    proc = _run(
        client,
        "preflight",
        "--values",
        str(REPO / "values" / "v6e-16.yaml"),
        "--",
        "base.yml",
        "run_name=r",
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "pip install 'tpu-launcher[preflight]'" in proc.stderr
    assert "in the launcher image" in proc.stderr


def test_the_client_runs_on_python_3_11(client):
    """requires-python says 3.11: the installed client's modules run the same plan under 3.11.
    Its dependencies are the 3.12 venv's (absl-py, PyYAML, rich are pure Python; PyYAML's
    optional C loader is skipped), so this checks the launcher's own code, not a 3.11 install."""
    found = subprocess.run([_uv(), "python", "find", "3.11"], capture_output=True, text=True)
    assert found.returncode == 0, f"a Python 3.11 interpreter is needed here: {found.stderr}"
    site = next((client[0] / "lib").glob("python3.12/site-packages"))
    plan = _run(
        client,
        "gke",
        "plan",
        "-f",
        _pinned_values(client),
        *TARGET,
        "--helm",
        HELM,
        python=found.stdout.strip(),
        env={"PYTHONPATH": str(site)},
    )
    assert plan.returncode == 0, plan.stderr
    assert "gcloud container clusters create c" in plan.stdout
    assert sys.version_info[:2] == (3, 12)  # and the test itself runs under the project's 3.12


def test_the_jobs_checks_need_only_maxtexts_configs(client):
    """`submit` checks the job against MaxText's own config model before anything is sent.
    Without MaxText it says how to get its configs alone; with `pip install --no-deps
    maxtext==<pin>` (a pure-Python wheel) the same checks run, and still no JAX is installed."""
    job = ["submit", "--dry-run", "--", "base.yml", "run_name=r", "steps=abc"]
    bare = _run(client, *job)
    assert bare.returncode == 2 and f"pip install --no-deps {MAXTEXT_PIN}" in bare.stderr, (
        bare.stderr
    )
    python = str(client[0] / "bin" / "python")
    with uv_cache_turn():
        proc = subprocess.run(
            [_uv(), "pip", "install", "--offline", "--no-deps", "--python", python, MAXTEXT_PIN],
            capture_output=True,
            text=True,
        )
    assert proc.returncode == 0, proc.stderr
    checked = _run(client, *job)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "steps: 'abc' is not a whole number" in checked.stderr
    assert _run(client, *job[:-1], "steps=30").returncode == 0
    imported = subprocess.run([python, "-c", "import jax"], capture_output=True, text=True)
    assert imported.returncode != 0
