"""Ray's version is declared once, in pyproject.toml's jobs extra (the client needs no Ray);
everything else that names it follows: the locks the images and the tests install, the image's
Ray base and the chart's spec.rayVersion. And the tests' torch is the torch image's."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml

from harness.paths import REPO

pytestmark = pytest.mark.unit


def declared_ray_version() -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = [
        *project["dependencies"],
        *(d for e in project["optional-dependencies"].values() for d in e),
    ]
    rays = [d for d in deps if re.match(r"ray\b", d)]
    (pinned,) = [d for d in rays if "==" in d]  # one pin; the other extras follow it
    assert all(re.fullmatch(r"ray\[[\w,]+\]", d) for d in rays if d != pinned), rays
    return re.fullmatch(r"ray\[[\w,]+\]==([\d.]+)", pinned)[1]


def test_every_place_that_names_ray_follows_pyproject():
    version = declared_ray_version()
    for lock in ("requirements.lock", "requirements-dev.lock", "requirements-torch.lock"):
        text = (REPO / "images" / "launcher" / lock).read_text()
        assert re.findall(r"^ray==(\S+)", text, re.M) == [version], lock
    dockerfile = (REPO / "images" / "launcher" / "Dockerfile").read_text()
    assert re.search(
        rf"^ARG RAY_IMAGE=rayproject/ray:{re.escape(version)}-py312-tpu$", dockerfile, re.M
    ), "the image's Ray base is another Ray"
    chart = REPO / "charts" / "tpu-stack"
    values = yaml.safe_load((chart / "values.yaml").read_text())
    assert values["ray"]["rayVersion"] == version
    # vLLM's RayService: the Ray Serve LLM the tests check its config with.
    assert values["vllm"]["rayService"]["rayVersion"] == version


def test_the_tests_torch_is_the_torch_images():
    """The local road's PyTorch (the tests' environment) is the torch image's version."""
    pins = [
        re.findall(r"^torch==(\S+)", (REPO / "images" / "launcher" / lock).read_text(), re.M)
        for lock in ("requirements-dev.lock", "requirements-torch.lock")
    ]
    assert pins[0] == pins[1] and len(pins[0]) == 1, pins
    assert not re.search(r"^torch", (REPO / "images/launcher/requirements.lock").read_text(), re.M)
