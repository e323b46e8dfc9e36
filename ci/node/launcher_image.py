"""The launcher image built here from images/launcher/Dockerfile as it is (Debian's docker.io,
its classic builder: Debian packages no buildx), on the stand-in Ray base (ci/node/images.py:
`--build-arg RAY_IMAGE`), and loaded into the node tier's containerd under the name the chart
renders for the release. The build context is the files the Dockerfile copies, staged as for an
installed client (launcher.client.release.image_tag): the classic builder reads no
Dockerfile.dockerignore, and the clone holds gigabytes it must not send (.venv, .tools).

    python ci/node/launcher_image.py NAME [--framework jax|torch]

Built once per name (the name's tag is the content of the image's sources:
launcher.client.release.image_tag); Docker's state is kept in /var/lib/tpu-stack-node/docker, so a
rebuild after a launcher edit reuses the lock's layer. Prints the image's size layer by layer
(what every host on GKE pulls) and writes it to .tools/node/run/<tag>.layers.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from ci.node import images, node  # noqa: E402
from launcher.client.release.image_tag import ImageSources, of_checkout  # noqa: E402

DOCKER_SOCK = node.SOCKETS / "docker.sock"
DOCKER = ["docker", "--host", f"unix://{DOCKER_SOCK}"]
LOCK = ROOT / "images" / "launcher" / "requirements.lock"
VLLM_STANDIN = HERE / "vllm-standin"


def docker(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*DOCKER, *args], **kw)


def start_dockerd() -> None:
    """Docker's daemon for the builds, on a socket and state of its own (not the machine's)."""
    if docker("version", capture_output=True).returncode == 0:
        return
    node.RUN.mkdir(parents=True, exist_ok=True)
    node.start(
        "dockerd",
        [
            "dockerd",
            f"--host=unix://{DOCKER_SOCK}",
            f"--data-root={node.STATE / 'docker'}",
            f"--exec-root={node.SOCKETS / 'docker'}",
            f"--pidfile={node.SOCKETS / 'dockerd.pid'}",
            "--storage-driver=overlay2",
        ],
    )
    node.wait("dockerd", lambda: docker("version", capture_output=True).returncode == 0)


def layers(archive: Path) -> list[dict]:
    """The image's layers as `docker save` wrote them (what a registry stores and every host
    pulls, before compression): each one's bytes and the Dockerfile step that made it, oldest
    first. Read from the archive's own config: Docker's `history` sizes are its overlay2 diff's,
    which on this kernel put a RUN's files on the next step."""
    with tarfile.open(archive) as tar:
        (manifest,) = json.load(tar.extractfile("manifest.json"))
        config = json.load(tar.extractfile(manifest["Config"]))
        sizes = [tar.getmember(layer).size for layer in manifest["Layers"]]
    steps = [h.get("created_by", "") for h in config.get("history", []) if not h.get("empty_layer")]
    steps = ["(the base image)"] * (len(sizes) - len(steps)) + steps
    return [{"size": size, "step": step} for size, step in zip(sizes, steps, strict=True)]


def build(name: str, framework: str) -> Path:
    """Builds the launcher image NAME (unless the node has it) and loads it into the node;
    returns its layer report."""
    tag = name.rsplit(":", 1)[1]
    context = ImageSources(of_checkout(ROOT).files, None).context(tag)
    dockerfile = context / "images" / "launcher" / "Dockerfile"
    return _build_and_load(name, dockerfile, context, {"FRAMEWORK": framework})


def vllm_standin_name() -> str:
    """The stand-in vLLM image's name: tagged by its sources and the base it is built on."""
    key = hashlib.sha256(images.ray_base(node.STATE / "images", LOCK).name.encode())
    for f in sorted(VLLM_STANDIN.iterdir()):
        key.update(f.name.encode() + b"\0" + f.read_bytes())
    return f"{images.REGISTRY}/node/vllm-standin:{key.hexdigest()[:12]}"


def build_vllm_standin() -> Path:
    """Builds the STAND-IN for vLLM's image (ci/node/vllm-standin) and loads it into the node."""
    version = images.ray_version(LOCK)
    return _build_and_load(
        vllm_standin_name(), VLLM_STANDIN / "Dockerfile", VLLM_STANDIN, {"RAY_VERSION": version}
    )


def _build_and_load(name: str, dockerfile: Path, context: Path, args: dict[str, str]) -> Path:
    """Builds NAME from DOCKERFILE on the stand-in Ray base (`--build-arg RAY_IMAGE`) unless
    the node has it, and loads it into the node's containerd; returns the layer report."""
    tag = name.rsplit(":", 1)[1]
    report = node.RUN / f"{tag}.layers.json"
    if name in node.ctr("images", "ls", "-q").stdout.split() and report.exists():
        return report
    base = images.ray_base(node.STATE / "images", LOCK)
    start_dockerd()
    if docker("image", "inspect", base.name, capture_output=True).returncode != 0:
        docker("load", "--quiet", "-i", str(base.archive), check=True, stdout=subprocess.DEVNULL)
    started = time.monotonic()
    build_args = [
        a for k, v in {"RAY_IMAGE": base.name, **args}.items() for a in ("--build-arg", f"{k}={v}")
    ]
    docker(
        "build",
        "--quiet",
        "-f",
        str(dockerfile),
        *build_args,
        "-t",
        name,
        str(context),
        check=True,
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
        stdout=subprocess.DEVNULL,
    )
    built = time.monotonic() - started
    archive = node.STATE / f"image-{tag}.tar"
    docker("save", "-o", str(archive), name, check=True)
    try:
        rows = layers(archive)
        node.sh(
            "ctr",
            "--address",
            str(node.CONTAINERD_SOCK),
            "-n",
            "k8s.io",
            "images",
            "import",
            str(archive),
        )
    finally:
        archive.unlink(missing_ok=True)
    loaded = time.monotonic() - started - built
    report.write_text(
        json.dumps(
            {
                "image": name,
                "base": base.name,
                "build_s": round(built, 1),
                "load_s": round(loaded, 1),
                "layers": rows,
            },
            indent=2,
        )
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "name", nargs="?", help="the launcher image's name as the chart renders it (REPO:TAG)"
    )
    parser.add_argument("--framework", default="jax", choices=["jax", "torch"])
    parser.add_argument(
        "--vllm-standin",
        action="store_true",
        help="build the STAND-IN vLLM image (ci/node/vllm-standin) instead; its name is printed",
    )
    args = parser.parse_args(argv)
    if args.vllm_standin == bool(args.name):
        parser.error("name the launcher image, or give --vllm-standin")
    built = build_vllm_standin() if args.vllm_standin else build(args.name, args.framework)
    report = json.loads(built.read_text())
    total = sum(r["size"] for r in report["layers"])
    print(
        f"{report['image']}: {total / 1e9:.2f} GB in {len(report['layers'])} layers "
        f"(built in {report['build_s']} s, loaded into the node in {report['load_s']} s)"
    )
    for row in report["layers"]:
        if row["size"]:
            print(f"  {row['size'] / 1e6:10.1f} MB  {row['step'][:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
