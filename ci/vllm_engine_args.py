#!/usr/bin/env python3
"""Writes the engine arguments of the vLLM the chart pins (values.yaml's vllm.image.tag, a
vllm-tpu release) into charts/tpu-stack/files/vllm-engine-args.json, so the chart refuses a
`vllm.engineKwargs` key vLLM's engine would reject at start (Ray Serve LLM hands the map to
`AsyncEngineArgs(**engine_kwargs)`; a dashed `max-num-seqs` fails every replica) where the
mistake is made, in `helm install`.

The fields are read from vLLM's own source, not written by hand: the dataclass fields of
`EngineArgs` and `AsyncEngineArgs` in vllm/engine/arg_utils.py of the vllm-tpu wheel of that
version on PyPI (downloaded once into the cache beside uv's, its sha256 checked against PyPI's
and kept in the file). Its ast is read: vLLM is not installed here (its imports pull torch).

ci/vllm_engine_args.py --check  # exit 1 if the file is stale (another tag, another wheel)
ci/vllm_engine_args.py --write  # rewrite it (`make chart-vllm-args`)
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
import urllib.request
import zipfile
from pathlib import Path

import yaml

CHART = Path(__file__).resolve().parent.parent / "charts" / "tpu-stack"
OUTPUT = CHART / "files" / "vllm-engine-args.json"
PACKAGE = "vllm-tpu"  # vllm/vllm-tpu's images are built from this release of vLLM
SOURCE = "vllm/engine/arg_utils.py"
CLASSES = ("EngineArgs", "AsyncEngineArgs")  # AsyncEngineArgs(EngineArgs): Ray Serve LLM's
WHEEL_TAG = "cp312-cp312-manylinux"  # the image's Python and platform
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tpu-stack" / "vllm"


def pinned_tag() -> str:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    return str(values["vllm"]["image"]["tag"])


def _wheel(version: str) -> tuple[str, str, str]:
    """(file name, URL, sha256) of the release's x86_64 wheel, from PyPI's JSON simple API."""
    request = urllib.request.Request(
        f"https://pypi.org/simple/{PACKAGE}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        files = json.load(answer)["files"]
    for f in files:
        name = f["filename"]
        if name.startswith(f"vllm_tpu-{version}-{WHEEL_TAG}") and name.endswith("x86_64.whl"):
            return name, f["url"], f["hashes"]["sha256"]
    raise SystemExit(f"PyPI has no {PACKAGE}=={version} wheel for {WHEEL_TAG}*x86_64")


def _fetch(version: str) -> tuple[bytes, str, str]:
    """arg_utils.py's text, the wheel's name and its sha256 (the download cached)."""
    name, url, sha256 = _wheel(version)
    path = CACHE / name
    if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
        CACHE.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=300) as answer:
            data = answer.read()
        if hashlib.sha256(data).hexdigest() != sha256:
            raise SystemExit(f"{url}: its sha256 is not PyPI's {sha256}")
        partial = path.with_suffix(".partial")
        partial.write_bytes(data)
        partial.replace(path)
    with zipfile.ZipFile(path) as wheel:
        return wheel.read(SOURCE), name, sha256


def fields(source: bytes) -> list[str]:
    """The dataclass fields of CLASSES (annotated names of each class body), sorted."""
    tree = ast.parse(source)
    found: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in CLASSES:
            found[node.name] = [
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign)
                and isinstance(s.target, ast.Name)
                and "ClassVar" not in ast.unparse(s.annotation)
            ]
    missing = [c for c in CLASSES if not found.get(c)]
    if missing:
        raise SystemExit(f"{SOURCE} has no dataclass fields for {missing}: vLLM moved them")
    # vLLM's private fields (`_api_process_rank`) are its own wiring, not a user's to set.
    return sorted({f for names in found.values() for f in names if not f.startswith("_")})


def wanted() -> dict:
    tag = pinned_tag()
    version = tag.removeprefix("v")
    source, wheel, sha256 = _fetch(version)
    return {
        "tag": tag,
        "source": f"{PACKAGE} {version} ({wheel}, sha256 {sha256}): {SOURCE}, "
        f"the fields of {' and '.join(CLASSES)}",
        "fields": fields(source),
    }


def main(mode: str) -> int:
    fresh = json.dumps(wanted(), indent=1) + "\n"
    if mode == "--write":
        OUTPUT.write_text(fresh)
        return 0
    if not OUTPUT.is_file() or OUTPUT.read_text() != fresh:
        print(
            f"{OUTPUT.relative_to(CHART.parent.parent)} is not the engine arguments of the "
            f"pinned vLLM ({pinned_tag()}): run make chart-vllm-args",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("--check", "--write"):
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
