"""The client as a user installs it (tests/image/conftest.py: the built wheel, without extras,
in a fresh virtual environment, run from a directory that holds no clone, and from inside the
clone). It installs no training stack, carries its chart, its values presets and its image's
sources at its own version: it plans, builds (as a dry run) and installs the image of its own
version under the tag a clone computes, checks jobs with no MaxText installed, and says what to
do where a command needs the training stack. A real Python 3.11 environment installs it too, as
its metadata promises."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import yaml

from harness.paths import REPO
from launcher.client.release.image_tag import of_checkout
from tests.image.conftest import HELM, run_client
from tests.image.test_image import _build_wheel, _uv, uv_cache_turn

pytestmark = pytest.mark.image
TRAINING_STACK = {"jax", "jaxlib", "libtpu", "maxtext", "ray", "tensorflow", "torch"}
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]
CHART = REPO / "charts" / "tpu-stack"


def _requirement_name(line: str) -> str:
    return re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0].lower()


_run = run_client


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
    # Every preset, and every file the image is built from.
    presets = {f"launcher/values/{p.name}" for p in (REPO / "values").glob("*.yaml")}
    assert presets and presets <= names
    assert {f"launcher/image/{n}" for n in ("Dockerfile", "cloudbuild.yaml", "pyproject.toml")} <= (
        names
    )
    assert "launcher/core/maxtext/configs/base.yml" in names  # the jobs' checks, with no MaxText
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


TARGET = ["--project", "p", "--cluster", "c", "--location", "us-east5-b", "--bucket", "ckpt-bucket"]
REGISTRY = "us-east5-docker.pkg.dev/p/tpu-stack/launcher"


def test_the_readme_road_plans_and_builds_the_image_of_this_version_anywhere(client):
    """The README's road after `pip install .`: from a directory outside the clone and from
    inside it, `gke plan --values v6e-16` (a preset, no path) builds the image from the installed
    package, under the tag a clone of the same sources computes; `image --dry-run` prints that
    tag, and `install --dry-run` installs it."""
    tag = of_checkout(REPO).tag(CHART)
    for where in (None, REPO):  # outside, then inside the clone: the installed package both times
        plan = _run(client, "gke", "plan", "--values", "v6e-16", *TARGET, "--helm", HELM, cwd=where)
        assert plan.returncode == 0, plan.stderr
        joined = plan.stdout.replace("\\\n", " ")
        build = next(
            line for line in joined.splitlines() if line.lstrip().startswith("gcloud builds submit")
        )
        assert f"_IMAGE={REGISTRY}:{tag}," in build, build
        context = Path(build.split("gcloud builds submit ", 1)[1].split()[0].strip("'\""))
        context = (where or client[1]) / context  # relative to where the plan runs
        assert "site-packages" not in str(context) and context.name == tag
        assert (context / "images/launcher/Dockerfile").is_file()
        assert not (context / ".venv").exists()  # the context holds what the Dockerfile copies
        assert "gcloud container clusters create c" in plan.stdout
        image = _run(client, "image", "--values", "v6e-16", *TARGET, "--helm", HELM, "--dry-run",
                     "--builder", "cloud-build", cwd=where)  # fmt: skip
        assert image.returncode == 0, image.stderr
        assert f"image tag: {tag}" in image.stdout
        install = _run(client, "install", "--dry-run", "-f", "v6e-16", *TARGET, "--helm", HELM,
                       cwd=where)  # fmt: skip
        assert install.returncode == 0, install.stderr
        assert re.search(r"upgrade --install tpu \S+/site-packages/launcher/chart ", install.stdout)
        assert f"--set ray.image.tag={tag}" in install.stdout
        submit = _run(client, "submit", "--dry-run", "-f", "v6e-16", "--", "base.yml",
                      "run_name=r", cwd=where)  # fmt: skip
        assert submit.returncode == 0, submit.stderr
        assert "--tpu=v6e-16 --num_slices=1 base.yml run_name=r" in submit.stdout


def test_the_installed_context_builds_the_package_it_came_from(client, wheel, tmp_path):
    """What the Dockerfile's `pip wheel /app` does with the context an installed client stages:
    the same package, file for file, as the wheel the client was installed from."""
    python = str(client[0] / "bin" / "python")
    staged = subprocess.run(
        [python, "-c", "from launcher.client.release.chart_source import packaged_chart as p; "
         "from launcher.client.release.image_tag import image_sources as s; "
         "c = p(); x = s(c); print(x.context(x.tag(c)))"],
        capture_output=True, text=True, cwd=client[1], env={"HOME": str(client[1])},
    )  # fmt: skip
    assert staged.returncode == 0, staged.stderr
    again = Path(_build_wheel(tmp_path, Path(staged.stdout.strip())))

    def contents(path: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(path) as zf:
            return {n: zf.read(n) for n in zf.namelist() if ".dist-info/" not in n}

    assert contents(again) == contents(wheel)


def _pinned_values(client) -> str:
    values = client[1] / "v6e-16-pinned.yaml"
    text = (REPO / "values" / "v6e-16.yaml").read_text()
    values.write_text(text + "\n" + yaml.safe_dump({"ray": {"image": {"tag": "0.1.0-abc"}}}))
    return str(values)


def test_a_pinned_image_is_the_one_the_release_pulls(client):
    """A team that pins the image (ray.image.tag) gets that tag: built only where the registry
    lacks it (the describe check skips the build), as from a clone."""
    plan = _run(client, "gke", "plan", "-f", _pinned_values(client), *TARGET, "--helm", HELM)
    assert plan.returncode == 0, plan.stderr
    joined = plan.stdout.replace("\\\n", " ")
    assert f"gcloud artifacts docker images describe {REGISTRY}:0.1.0-abc" in joined
    assert f"_IMAGE={REGISTRY}:0.1.0-abc," in joined


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


def test_a_chart_of_its_own_unpinned_is_refused_with_the_fix(client, tmp_path):
    """A copy of the chart elsewhere is no launcher's own: its image's tag cannot be known."""
    (chart,) = client[0].glob("lib/python3.12/site-packages/launcher/chart")
    copied = subprocess.run(["cp", "-r", str(chart), str(tmp_path / "tpu-stack")])
    assert copied.returncode == 0
    plan = _run(client, "gke", "plan", "-f", "v6e-16", "--chart", str(tmp_path / "tpu-stack"),
                *TARGET, "--helm", HELM)  # fmt: skip
    assert plan.returncode == 2, plan.stdout + plan.stderr
    assert "ray.image.tag" in plan.stderr and "fix: leave out --chart" in plan.stderr
    assert "Traceback" not in plan.stderr


def test_values_files_are_named_and_read_the_same_by_every_command(client, tmp_path):
    """`-f A -f B` is merged as Helm merges it, by every command: `submit` binds the job to the
    slices `gke plan` plans; a missing file or one that is not YAML is refused, naming the file
    (and the line), with no traceback."""
    two = tmp_path / "override.yaml"
    two.write_text("ray:\n  worker:\n    terminationGracePeriodSeconds: 40\n")
    files = ["-f", "v6e-16-x2", "-f", str(two)]
    plan = _run(client, "gke", "plan", *files, *TARGET, "--helm", HELM)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.count("gcloud container node-pools create") == 3  # the CPU pool and 2
    job = ["--", "base.yml", "run_name=r", "steps=5"]
    submitted = _run(client, "submit", "--dry-run", *files, *job)
    assert submitted.returncode == 0, submitted.stderr
    assert "--tpu=v6e-16 --num_slices=2" in submitted.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("ray:\n  worker:\n    tpu:\n   type: v6e-16\n")
    commands = (
        ["gke", "plan", *TARGET, "--helm", HELM],
        ["submit", "--dry-run", *job],
        ["preflight", *job],
        ["install", "--dry-run", *TARGET, "--helm", HELM],
    )
    for argv in commands:
        for name, says in ((str(bad), f"{bad}:4:"), ("nosuch.yaml", "no values file nosuch")):
            at = argv.index("--") if "--" in argv else len(argv)
            proc = _run(client, *argv[:at], "-f", name, *argv[at:])
            assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
            assert says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_command_that_needs_the_training_stack_says_how_to_get_it(client):
    proc = _run(client, "preflight", "--values", "v6e-16", "--", "base.yml", "run_name=r")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    # What pip installs: the clone this client came from, with the extra (PEP 610's record),
    # never a name on PyPI that anyone may take.
    assert f"pip install '{REPO}[preflight]'" in proc.stderr, proc.stderr
    assert "tpu-launcher[" not in proc.stderr
    assert "in the launcher image" in proc.stderr


def test_the_jobs_checks_need_no_maxtext(client):
    """`submit` checks the job against MaxText's own config model before anything is sent,
    with the copy of the pinned MaxText's configs the package carries: no MaxText, no JAX."""
    job = ["submit", "--dry-run", "--", "base.yml", "run_name=r", "steps=abc"]
    checked = _run(client, *job)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "steps: 'abc' is not a whole number" in checked.stderr
    model = _run(client, *job[:-1], "model_name=llama3-7b")  # the model table: the copy's
    assert model.returncode == 2 and "maxtext/configs/types.py.txt" in model.stderr, model.stderr
    negative = _run(client, *job[:-1], "steps=-5")
    assert negative.returncode == 2 and "steps: is -5" in negative.stderr, negative.stderr
    assert _run(client, *job[:-1], "steps=30").returncode == 0
    # For a values file's slice: what is checked here and what is not, said; then submitted.
    bound = _run(client, "submit", "-f", "v6e-16", "--address", "http://127.0.0.1:9", "--",
                 "base.yml", "run_name=r")  # fmt: skip
    assert "preflight: checked here: the job's flags, MaxText's keys" in bound.stdout
    assert "not here: the compile for its TPU" in bound.stdout
    assert bound.returncode == 2 and "no Ray dashboard answers at http://127.0.0.1:9" in (
        bound.stderr
    ), bound.stderr
    python = str(client[0] / "bin" / "python")
    for module in ("jax", "maxtext"):
        imported = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
        assert imported.returncode != 0


@pytest.fixture(scope="module")
def client_311(wheel, tmp_path_factory) -> tuple[Path, Path]:
    """The wheel in a real Python 3.11 environment (the oldest the metadata declares), its
    dependencies resolved for 3.11."""
    found = subprocess.run([_uv(), "python", "find", "3.11"], capture_output=True, text=True)
    assert found.returncode == 0, f"a Python 3.11 interpreter is needed here: {found.stderr}"
    root = tmp_path_factory.mktemp("client311")
    env_dir, outside = root / "venv", root / "elsewhere"
    outside.mkdir()
    made = subprocess.run([found.stdout.strip(), "-m", "venv", "--without-pip", str(env_dir)])
    assert made.returncode == 0
    with uv_cache_turn():
        proc = subprocess.run(
            [_uv(), "pip", "install", "--python", str(env_dir / "bin" / "python"), str(wheel)],
            capture_output=True,
            text=True,
        )
    assert proc.returncode == 0, proc.stderr
    return env_dir, outside


def test_the_client_installs_and_runs_on_python_3_11(client_311):
    """requires-python says 3.11: there the README's road works as on 3.12: the plan, the
    image's tag, and a job's checks before submit."""
    version = subprocess.run(
        [str(client_311[0] / "bin" / "python"), "--version"], capture_output=True, text=True
    )
    assert version.stdout.startswith("Python 3.11"), version.stdout
    plan = _run(client_311, "gke", "plan", "--values", "v6e-16", *TARGET, "--helm", HELM)
    assert plan.returncode == 0, plan.stderr
    assert f"_IMAGE={REGISTRY}:{of_checkout(REPO).tag(CHART)}," in plan.stdout
    job = ["submit", "--dry-run", "-f", "v6e-16", "--", "base.yml", "run_name=r"]
    assert _run(client_311, *job).returncode == 0
    refused = _run(client_311, *job, "per_device_batch_size=-2")
    assert refused.returncode == 2 and "per_device_batch_size: is -2" in refused.stderr
    assert sys.version_info[:2] == (3, 12)  # and the test itself runs under the project's 3.12
