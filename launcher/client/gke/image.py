"""The launcher image and the chart, as gke plan steps: the Artifact Registry repository, the
image built by Cloud Build from a checkout (or, from an installed package, the pinned image
found in the registry), and the chart pushed beside it.
"""

from __future__ import annotations

from pathlib import Path

from launcher.client.gke.access import build_account, build_staging
from launcher.client.gke.release import ReleaseNeeds
from launcher.client.gke.steps import Check, Step, gcloud
from launcher.client.gke.target import CREATED_BY, REPOSITORY, GkeTarget
from launcher.client.release.chart_meta import chart_meta
from launcher.client.release.chart_source import chart_repository
from launcher.client.release.image_tag import DOCKERFILE, image_tag_of
from launcher.client.workspace import PACKAGED_CHARTS
from launcher.core.job.frameworks import of_image_tag

CLOUDBUILD = "images/launcher/cloudbuild.yaml"


def image_steps(
    need: ReleaseNeeds,
    target: GkeTarget,
    source: Path | None,
    chart: Path,
    helm: str,
    access: list[Step],
) -> list[Step]:
    """The Artifact Registry repository (unless --registry names one of yours), who may use it
    (`access`), and the launcher image the release's Ray pods pull, built by Cloud Build (no
    local Docker needed) from the checkout `source`; with no checkout (the chart inside an
    installed package), the image the values pin, which must be in the registry already."""
    if not need.launcher_image:
        return []
    steps = []
    if not target.registry:
        repo = [REPOSITORY, f"--location={target.region}", f"--project={target.project}"]
        steps.append(
            Step(
                f"Artifact Registry repository {REPOSITORY} in {target.region} (the image)",
                gcloud(
                    "artifacts",
                    "repositories",
                    "create",
                    *repo,
                    "--repository-format=docker",
                    f"--labels={CREATED_BY}",
                ),
                done_if=Check(gcloud("artifacts", "repositories", "describe", *repo)),
            )
        )
    steps += access
    if source is not None:
        steps.append(image_build_step(need.launcher_image, target, source))
        steps += chart_push_steps(chart, need.launcher_image, target, helm)
    else:
        steps.append(image_present_step(need.launcher_image, target))
    return steps


def describe_image(image: str, target: GkeTarget) -> list[str]:
    """`gcloud artifacts docker images describe IMAGE`: fails when the registry lacks it."""
    project = f"--project={target.project}"
    return gcloud("artifacts", "docker", "images", "describe", image, project)


PACKAGED = PACKAGED_CHARTS


def chart_push_steps(chart: Path, image: str, target: GkeTarget, helm: str) -> list[Step]:
    """The chart pushed beside the image, its appVersion the image's tag, so the chart pulled
    from the registry (`install --chart oci://...`) runs the image pushed with it. Helm reaches
    Artifact Registry with the gcloud login through Docker's credential helper ("Configure
    authentication to Artifact Registry for Helm": reuse Docker credentials)."""
    meta = chart_meta(chart)
    name, version = meta.name, meta.version
    tag = image_tag_of(image) or meta.app_version
    host = target.image_repository[0]
    repository = chart_repository(target.image_repository)
    # Done when the registry's chart of this version was packaged for this image.
    pushed = Check(
        [helm, "show", "chart", f"{repository}/{name}", "--version", version],
        output=f"appVersion: {tag}",
        contains=True,
    )
    steps = []
    if host.endswith("-docker.pkg.dev"):
        login = gcloud("auth", "configure-docker", host, "--quiet")
        what = f"Helm and Docker reach {host} with your gcloud login (a credential helper)"
        steps.append(Step(what, login, done_if=pushed))
    package = [helm, "package", str(chart), "--app-version", tag, "--destination", PACKAGED]
    push = [helm, "push", f"{PACKAGED}/{name}-{version}.tgz", repository]
    return [
        *steps,
        Step(f"chart {name} {version} packaged for image {tag}", package, done_if=pushed),
        Step(f"chart pushed to {repository} (install --chart {repository}/{name})", push, pushed),
    ]


def image_present_step(image: str, target: GkeTarget) -> Step:
    """No checkout here to build from: the pinned image must exist (its describe fails, with
    gcloud's own words, and the plan stops before anything after it is made)."""
    return Step(
        f"launcher image {image} is in the registry (pushed by `tpu-launcher image` from a "
        "clone of this version; nothing here builds it)",
        describe_image(image, target),
    )


def image_build_step(image: str, target: GkeTarget, source: Path) -> Step:
    """Cloud Build builds images/launcher/Dockerfile from `source` (the checkout) and pushes
    `image`, for the framework its tag's suffix says; skipped when that tag is in the registry
    already (`tpu-launcher image` rebuilds). Into the repository `gke up` makes, as the build
    account `gke up` makes for it (gke/access.py), its source staged where that account may
    read; into a registry of your own (--registry), as Cloud Build's default account, whose
    access is yours to give."""
    framework = of_image_tag(image_tag_of(image))
    own = [] if target.registry else [
        f"--service-account=projects/{target.project}/serviceAccounts/"
        f"{build_account(target.project)}",
        f"--gcs-source-staging-dir={build_staging(target.project)}/source",
    ]  # fmt: skip
    return Step(
        f"launcher image {image} (Cloud Build: {DOCKERFILE}, {framework.describe})",
        gcloud(
            "builds",
            "submit",
            str(source),
            f"--project={target.project}",
            f"--config={source / CLOUDBUILD}",
            f"--substitutions=_IMAGE={image},_FRAMEWORK={framework.name}",
            *own,
        ),
        done_if=Check(describe_image(image, target)),
    )
