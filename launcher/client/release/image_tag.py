"""What the launcher image is built from, and its tag: the chart's appVersion and a hash of the
build context (the Dockerfile and every file it copies), e.g. `0.1.0-3f2a9c1b7e0d`. A changed
launcher is a new tag, so `gke up` builds it (it skips a tag the registry has) and an upgraded
release pulls it (`IfNotPresent` never pulls a tag again); unchanged sources keep their tag and
are not built twice.

The context comes from a clone (the repository root, sent as it is) or from an installed package
(the wheel carries every file the Dockerfile copies: pyproject.toml's force-include says where),
staged into a directory of its own. Both give the same files under the same names, so one version
of the launcher has one tag, whichever way it was installed and on whatever machine."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from launcher.client.release.chart_meta import chart_meta
from launcher.core.job.frameworks import of_image_tag

DOCKERFILE = "images/launcher/Dockerfile"
PYPROJECT = "pyproject.toml"
# Never in the image (images/launcher/Dockerfile.dockerignore, .gcloudignore).
_NOT_COPIED = ("__pycache__",)


def _copied(dockerfile: str) -> list[str]:
    """The context paths the Dockerfile's COPY and ADD instructions take."""
    copied = []
    for line in dockerfile.splitlines():
        words = line.split()
        if words and words[0].upper() in ("COPY", "ADD"):
            copied += [w for w in words[1:] if not w.startswith("--")][:-1]  # the last: dest
    return copied


def _files_under(directory: Path) -> list[Path]:
    return sorted(
        f
        for f in directory.rglob("*")
        if f.is_file() and not any(part in _NOT_COPIED for part in f.parts)
    )


@dataclass(frozen=True)
class ImageSources:
    """The image's build context: each file's path in it, and where that file is here."""

    files: dict[str, Path]
    checkout: Path | None  # a clone's root, the context as it is; None: an installed package

    def tag(self, chart: Path) -> str:
        """`<appVersion>-<12 hex digits of the context's names and bytes>`."""
        digest = hashlib.sha256()
        for name in sorted(self.files):
            digest.update(name.encode() + b"\0")
            digest.update(hashlib.sha256(self.files[name].read_bytes()).digest())
        return f"{chart_meta(chart).app_version}-{digest.hexdigest()[:12]}"

    def context(self, tag: str) -> Path:
        """A directory to build from: the clone, or the package's files staged under their
        context names in this user's cache, one directory per tag (made once, kept: the plan
        `gke plan` prints names it)."""
        if self.checkout is not None:
            return self.checkout
        staged = _cache_dir() / "image-context" / tag
        if not (staged / DOCKERFILE).is_file():
            partial = staged.with_name(f".{tag}.{os.getpid()}")
            shutil.rmtree(partial, ignore_errors=True)
            for name, path in self.files.items():
                (partial / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, partial / name)
            shutil.rmtree(staged, ignore_errors=True)
            partial.rename(staged)  # whole or not at all
        return staged


def _cache_dir() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "tpu-launcher"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tpu-launcher"


def of_checkout(root: Path) -> ImageSources:
    """A clone's context: the Dockerfile and the files its COPY instructions take."""
    found = {DOCKERFILE: root / DOCKERFILE}
    for name in _copied((root / DOCKERFILE).read_text()):
        path = root / name
        if path.is_dir():
            found |= {f.relative_to(root).as_posix(): f for f in _files_under(path)}
        else:
            found[name] = path
    return ImageSources(found, root)


def of_package(package: Path) -> ImageSources:
    """An installed package's context: each installed file under the context name the wheel's
    build took it from (the shipped pyproject.toml's force-include), else `launcher/...`."""
    shipped = package / "image" / PYPROJECT
    table = tomllib.loads(shipped.read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    # wheel path (launcher/chart) -> context path (charts/tpu-stack)
    origin = {dest: src for src, dest in table["force-include"].items()}
    found = {}
    for path in _files_under(package):
        installed = f"{package.name}/{path.relative_to(package).as_posix()}"
        name = installed
        for dest, src in origin.items():
            if installed == dest or installed.startswith(dest + "/"):
                name = src + installed[len(dest) :]
                break
        found[name] = path
    copied = _copied(found[DOCKERFILE].read_text()) if DOCKERFILE in found else []
    wanted = {n: p for n, p in found.items() if n == DOCKERFILE or _under_any(n, copied)}
    return ImageSources(wanted, None)


def _under_any(name: str, prefixes: list[str]) -> bool:
    return any(name == p or name.startswith(p.rstrip("/") + "/") for p in prefixes)


def image_sources(chart: Path) -> ImageSources | None:
    """The context the chart's own image is built from: the clone the chart is in
    (charts/tpu-stack), or the installed package it is in (launcher/chart); None for any other
    chart (a pulled or copied one: its image is the one it was packaged for)."""
    chart = chart.resolve()
    root = chart.parents[1]
    if (root / DOCKERFILE).is_file():
        return of_checkout(root)
    if (chart.parent / "image" / PYPROJECT).is_file():
        return of_package(chart.parent)
    return None


def image_tag_of(ref: str) -> str | None:
    """The tag of an image reference (`host/path:tag@sha256:...` -> `tag`), None untagged."""
    name = ref.partition("@")[0].rsplit("/", 1)[-1]
    return name.partition(":")[2] or None


def skew(ref: str, client_version: str, sources_tag: str | None) -> str | None:
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
            f"version for both: install the client of version {image_version}, or run "
            "`tpu-launcher image` and `install` from this one"
        )
    if sources_tag is not None and tag != sources_tag:
        return (
            f"the release runs the launcher image {tag}, built from other sources than this "
            f"client's ({sources_tag}): the job runs the image's launcher, not these sources. "
            "`tpu-launcher image` and `install` put these on the cluster"
        )
    return None
