"""The launcher image's tag: the chart's appVersion and a hash of what the image is built from
(the Dockerfile and every file it copies), e.g. `0.1.0-3f2a9c1b7e0d`. A changed launcher is a
new tag, so `gke up` builds it (it skips a tag the registry has) and an upgraded release pulls
it (`IfNotPresent` never pulls a tag again); an unchanged checkout keeps its tag and is not
built twice."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from launcher.client.chart_meta import chart_meta
from launcher.core.frameworks import of_image_tag

DOCKERFILE = "images/launcher/Dockerfile"
# Never in the image (images/launcher/Dockerfile.dockerignore, .gcloudignore).
_NOT_COPIED = ("__pycache__",)


def build_inputs(source: Path) -> list[Path]:
    """The Dockerfile and the files its COPY instructions take from the checkout `source`."""
    copied: list[str] = []
    for line in (source / DOCKERFILE).read_text().splitlines():
        words = line.split()
        if words and words[0].upper() in ("COPY", "ADD"):
            copied += [w for w in words[1:] if not w.startswith("--")][:-1]  # the last: dest
    found = [source / DOCKERFILE]
    for name in copied:
        path = source / name
        if path.is_dir():
            found += sorted(
                f
                for f in path.rglob("*")
                if f.is_file() and not any(part in _NOT_COPIED for part in f.parts)
            )
        else:
            found.append(path)
    return found


def content_tag(source: Path, chart: Path) -> str:
    """`<appVersion>-<12 hex digits of the build inputs' names and bytes>`."""
    version = chart_meta(chart).app_version
    digest = hashlib.sha256()
    for path in build_inputs(source):
        digest.update(path.relative_to(source).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return f"{version}-{digest.hexdigest()[:12]}"


def image_tag_of(ref: str) -> str | None:
    """The tag of an image reference (`host/path:tag@sha256:...` -> `tag`), None untagged."""
    name = ref.partition("@")[0].rsplit("/", 1)[-1]
    return name.partition(":")[2] or None


def skew(ref: str, client_version: str, checkout_tag: str | None) -> str | None:
    """What differs between this client and the launcher image a release runs, said for a
    user about to submit to it; None when nothing does (or the tag is not one of ours)."""
    tag = image_tag_of(ref)
    if tag is not None:  # the framework's suffix is no part of the sources' tag
        tag = tag.removesuffix(of_image_tag(tag).tag_suffix)
    if tag is None or not re.fullmatch(r"\d+\.\d+\.\d+(-[0-9a-f]{12})?", tag):
        return None  # not a tag of ours (`latest`, a team's own): nothing to compare
    image_version = tag.partition("-")[0]
    if image_version != client_version:
        return (
            f"this client is tpu-launcher {client_version}; the release runs the launcher image "
            f"{tag} (version {image_version}): the job runs {image_version}'s launcher. Use one "
            f"version for both: `pip install tpu-launcher=={image_version}`, or `tpu-launcher "
            "image` and `install` from this version"
        )
    if checkout_tag is not None and tag != checkout_tag:
        return (
            f"the release runs the launcher image {tag}, built from other sources than this "
            f"checkout ({checkout_tag}): the job runs the image's launcher, not these sources. "
            "`tpu-launcher image` and `install` put these on the cluster"
        )
    return None
