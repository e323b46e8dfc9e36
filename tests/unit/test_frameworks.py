"""A job of one framework on the other's launcher image stops on the head before any worker
starts, saying which image it met and how to get the right one; the image's tag says its
framework (launcher.core.job.frameworks), and the builds are told it."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.client.gke.image import image_build_step
from launcher.client.release.helm_release import refuse_other_framework
from launcher.client.release.image_tag import skew
from launcher.core.errors import UsageError
from launcher.core.job.frameworks import (
    IMAGE_FRAMEWORK_ENV,
    JAX,
    TORCH,
    check_image_runs,
    of_image_tag,
)

pytestmark = pytest.mark.unit


def test_a_job_on_the_other_frameworks_image_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setenv(IMAGE_FRAMEWORK_ENV, "jax")
    check_image_runs(JAX)
    with pytest.raises(UsageError) as e:
        check_image_runs(TORCH)
    assert e.value.field == "python -m launcher.runtime train-torch"
    assert "launcher image built for JAX (MaxText)" in e.value.problem
    assert "ray.framework=torch" in e.value.fix and "--framework jax" in e.value.fix
    monkeypatch.setenv(IMAGE_FRAMEWORK_ENV, "torch")
    with pytest.raises(UsageError) as e:
        check_image_runs(JAX)
    assert "built for PyTorch (TorchTPU)" in e.value.problem


def test_off_an_image_every_job_runs(monkeypatch):
    monkeypatch.delenv(IMAGE_FRAMEWORK_ENV, raising=False)  # the local cluster's environment
    check_image_runs(JAX)
    check_image_runs(TORCH)


def test_the_tag_says_the_framework_and_cloud_build_is_told_it():
    assert of_image_tag("0.1.0-3f2a9c1b7e0d-torch") is TORCH
    assert of_image_tag("0.1.0-3f2a9c1b7e0d") is JAX and of_image_tag(None) is JAX
    target = type("T", (), {"project": "p", "registry": None})()
    step = image_build_step("r/launcher:0.1.0-3f2a9c1b7e0d-torch", target, Path("/src"))  # type: ignore[arg-type]
    assert (
        "--substitutions=_IMAGE=r/launcher:0.1.0-3f2a9c1b7e0d-torch,_FRAMEWORK=torch" in step.argv
    )


def test_the_suffix_is_no_skew_between_the_checkout_and_its_torch_image():
    assert skew("r/launcher:0.1.0-3f2a9c1b7e0d-torch", "0.1.0", "0.1.0-3f2a9c1b7e0d") is None
    assert "other sources" in skew(
        "r/launcher:0.1.0-aaaaaaaaaaaa-torch", "0.1.0", "0.1.0-3f2a9c1b7e0d"
    )


def test_submit_to_a_release_of_the_other_framework_is_refused_before_sending():
    """What `submit --release` checks once it has read the release head's image."""
    torch_image = "r/launcher:0.1.0-3f2a9c1b7e0d-torch"
    refuse_other_framework(torch_image, TORCH, "team")
    with pytest.raises(UsageError) as e:
        refuse_other_framework(torch_image, JAX, "team")
    assert e.value.field == "--release"
    assert f"team runs the launcher image {torch_image}, built for PyTorch" in e.value.problem
    assert "ray.framework=jax" in e.value.fix and "--framework torch" in e.value.fix
    with pytest.raises(UsageError):
        refuse_other_framework("r/launcher:0.1.0-3f2a9c1b7e0d", TORCH, "team")
