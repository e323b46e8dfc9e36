"""The frameworks a training job runs on, and the launcher image each needs: one image per
framework, built from its own lock (the JAX image has no torch, the torch image no MaxText),
tagged with its own suffix, and saying in its environment which it is, so that a job submitted
to a cluster running the other stops on the head before any worker starts.

The chart says the same facts once more, where Helm must: `ray.framework`'s values in
values.schema.json and the tag suffix in templates/_helpers.tpl (tests/chart hold them equal).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from launcher.core.errors import UsageError
from launcher.core.runtime_door import RUNTIME_PROG

# Set by images/launcher/Dockerfile from its FRAMEWORK build argument.
IMAGE_FRAMEWORK_ENV = "LAUNCHER_IMAGE_FRAMEWORK"


@dataclass(frozen=True)
class Framework:
    name: str
    command: str  # the in-cluster entrypoint: `python -m launcher.runtime <command>`
    lock: str  # under images/launcher/
    tag_suffix: str  # the image tag's, after the launcher's version and content hash
    describe: str


JAX = Framework("jax", "train", "requirements.lock", "", "JAX (MaxText)")
TORCH = Framework("torch", "train-torch", "requirements-torch.lock", "-torch", "PyTorch (TorchTPU)")
FRAMEWORKS = {f.name: f for f in (JAX, TORCH)}
NAMES = tuple(FRAMEWORKS)


def check_image_runs(job: Framework) -> None:
    """Refuses a `job` on an image built for another framework (no check off an image: the
    local cluster runs the tests' environment, which has both)."""
    built_for = os.environ.get(IMAGE_FRAMEWORK_ENV)
    if built_for is None or built_for == job.name:
        return
    image = FRAMEWORKS.get(built_for)
    raise UsageError(
        f"{RUNTIME_PROG} {job.command}",
        f"is a {job.describe} job, and this cluster runs the launcher image built for "
        f"{image.describe if image else built_for}, which cannot run it",
        f"install the release with ray.framework={job.name} (its image: `tpu-launcher image` "
        f"with those values builds it, tagged ...{job.tag_suffix or '<hash>'}), or submit "
        f"with --framework {built_for}",
    )


def of_image_tag(tag: str | None) -> Framework:
    """The framework an image tag of ours was built for: its suffix says (none: JAX)."""
    return next(
        (f for f in FRAMEWORKS.values() if f.tag_suffix and (tag or "").endswith(f.tag_suffix)), JAX
    )
