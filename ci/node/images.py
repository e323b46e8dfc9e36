"""The node tier's images, built here (no registry can be pulled from): each is one layer made
from files of this machine, written as a Docker image archive that containerd imports
(`ctr images import`) under the name the pods ask for.

- `pause`: the pod sandbox (containerd's `sandbox_image`), ci/node/pause.c compiled statically.
- `probe`: Debian's busybox-static as /bin/busybox with its applets (sh, nc, httpd, wget): the
  stand-in servers and clients the node tier's policy tests run under the chart's labels.
- `ray-standin`: a STAND-IN for `rayproject/ray:<version>-py312-tpu`, the launcher image's base,
  which cannot be pulled here. What of it the chart and the launcher's Dockerfile rely on is kept:
  Debian (bookworm, by debootstrap), Python 3.12 in /home/ray/anaconda3 (this machine's, copied)
  with `ray[default]` of the lock's version on PATH, user 1000 (`ray`, group 100), home
  /home/ray. Unlike Ray's image it trusts this machine's CA bundle, as this machine's pip does
  (a TLS proxy stands between it and PyPI): the Dockerfile's `pip install` runs on it unchanged.

Named `tpu-stack.local/<name>:<tag of the content>`: a changed source is a new tag.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REGISTRY = "tpu-stack.local"
# The busybox applets the probe image links (Debian's busybox-static has them all).
APPLETS = ("sh", "nc", "httpd", "wget", "sleep", "cat", "echo", "ls", "id", "env", "true")
NOBODY = 65534


@dataclass(frozen=True)
class Image:
    name: str
    archive: Path

    @property
    def tag(self) -> str:
        return self.name.rsplit(":", 1)[1]


def _layer(files: dict[str, tuple[bytes, int]], links: dict[str, str]) -> bytes:
    """A layer tar: path -> (content, mode), symlink path -> target; owned by root, dated 0."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({str(Path(p).parent) for p in [*files, *links]} - {"."})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(content), mode
            tar.addfile(info, io.BytesIO(content))
        for path, target in sorted(links.items()):
            info = tarfile.TarInfo(path)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buf.getvalue()


def _image_config(config: dict, diff_id: str) -> bytes:
    """The image's config for one layer (its digest `diff_id`), as its archive stores it."""
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    return json.dumps(image_config, sort_keys=True).encode()


def _write_archive(dest: Path, repo: str, tag: str, config: bytes, layer: bytes | Path) -> Image:
    """A `docker save` archive of one layer (bytes, or a file too large for memory), made
    whole or not at all."""
    name = f"{REGISTRY}/{repo}:{tag}"
    archive = dest / f"{repo}-{tag}.tar"
    dest.mkdir(parents=True, exist_ok=True)
    manifest = [{"Config": "config.json", "RepoTags": [name], "Layers": ["layer.tar"]}]
    partial = archive.with_suffix(".partial")
    with tarfile.open(partial, "w") as tar:
        members = [("config.json", config), ("manifest.json", json.dumps(manifest).encode())]
        if isinstance(layer, bytes):
            members.insert(1, ("layer.tar", layer))
        for member, content in members:
            info = tarfile.TarInfo(member)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        if isinstance(layer, Path):
            tar.add(layer, "layer.tar")
    partial.rename(archive)
    return Image(name, archive)


def _archive(dest: Path, repo: str, layer: bytes, config: dict) -> Image:
    """A small image's archive, tagged by its config's digest (which holds the layer's)."""
    config_bytes = _image_config(config, "sha256:" + hashlib.sha256(layer).hexdigest())
    tag = hashlib.sha256(config_bytes).hexdigest()[:12]
    archive = dest / f"{repo}-{tag}.tar"
    if archive.exists():
        return Image(f"{REGISTRY}/{repo}:{tag}", archive)
    return _write_archive(dest, repo, tag, config_bytes, layer)


def _archive_of_file(dest: Path, repo: str, tag: str, layer: Path, config: dict) -> Image:
    """A large image's archive, its layer a file, under a tag the caller derives."""
    digest = hashlib.sha256()
    with layer.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    config_bytes = _image_config(config, f"sha256:{digest.hexdigest()}")
    return _write_archive(dest, repo, tag, config_bytes, layer)


def pause(dest: Path) -> Image:
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "pause"
        subprocess.run(
            ["gcc", "-Os", "-static", "-o", str(binary), str(HERE / "pause.c")], check=True
        )
        subprocess.run(["strip", str(binary)], check=True)
        layer = _layer({"pause": (binary.read_bytes(), 0o755)}, {})
    return _archive(dest, "pause", layer, {"Entrypoint": ["/pause"], "User": f"{NOBODY}"})


def probe(dest: Path, busybox: Path = Path("/bin/busybox")) -> Image:
    if not busybox.exists():
        raise SystemExit(
            f"error: {busybox} is missing: run ci/node/install-deps.sh (busybox-static)"
        )
    files = {
        "bin/busybox": (busybox.read_bytes(), 0o755),
        "etc/passwd": (
            f"root:x:0:0::/:/bin/sh\nnobody:x:{NOBODY}:{NOBODY}::/:/bin/sh\n".encode(),
            0o644,
        ),
        "etc/group": (f"root:x:0:\nnogroup:x:{NOBODY}:\n".encode(), 0o644),
        "www/index.html": (b"probe\n", 0o644),
    }
    links = {f"bin/{a}": "busybox" for a in APPLETS}
    return _archive(dest, "probe", _layer(files, links), {"Entrypoint": ["/bin/sh"]})


# What Ray's own image has of Debian that Python, Ray and the launcher's wheels load (Python's
# modules: ssl, sqlite3, ctypes, lzma, bz2, readline, uuid; jaxlib: libgomp), procps (`ps`,
# which Ray's tools call) and wget (KubeRay's readiness probe of a RayService's workers runs
# `wget ... :8000/-/healthz` in the container: without it they are never Ready).
DEBIAN_PACKAGES = [
    *("ca-certificates", "libssl3", "libffi8", "libsqlite3-0", "libbz2-1.0", "liblzma5"),
    *("zlib1g", "libreadline8", "libncursesw6", "libuuid1", "libexpat1", "libgomp1"),
    *("procps", "netbase", "wget"),
]
DEBIAN_MIRROR = "http://deb.debian.org/debian"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
RAY_PYTHON = "home/ray/anaconda3"  # where rayproject/ray keeps its Python, on PATH
# Not copied from this machine's Python: tests, GUIs, and what pip installs (Ray goes in anew).
PYTHON_EXCLUDES = (
    "lib/python3.12/test",
    "lib/python3.12/idlelib",
    "lib/python3.12/tkinter",
    "lib/python3.12/turtledemo",
    "__pycache__",
    "lib/python3.12/site-packages/*",
)


def ray_version(lock: Path) -> str:
    for line in lock.read_text().splitlines():
        if line.startswith("ray=="):
            return line.split("==", 1)[1].split()[0]
    raise SystemExit(f"error: {lock} pins no ray")


def _debian(dest: Path) -> Path:
    """Debian bookworm's minimal root with DEBIAN_PACKAGES (debootstrap), as a tar, made once."""
    key = hashlib.sha256(" ".join([DEBIAN_MIRROR, *DEBIAN_PACKAGES]).encode()).hexdigest()[:12]
    tarball = dest / f"debian-bookworm-{key}.tar"
    if not tarball.exists():
        with tempfile.TemporaryDirectory(dir=dest) as tmp:
            rootfs = Path(tmp) / "rootfs"
            subprocess.run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(DEBIAN_PACKAGES)}",
                    "bookworm",
                    str(rootfs),
                    DEBIAN_MIRROR,
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            shutil.rmtree(rootfs / "var/cache/apt", ignore_errors=True)
            partial = Path(tmp) / "rootfs.tar"
            subprocess.run(
                ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], check=True
            )
            partial.rename(tarball)
    return tarball


def ray_base(dest: Path, lock: Path, python: Path = Path(sys.base_prefix)) -> Image:
    """The stand-in Ray base image (see the module's docstring), built once per content."""
    version = ray_version(lock)
    key = hashlib.sha256()
    for part in (" ".join(DEBIAN_PACKAGES), version, sys.version, CA_BUNDLE.read_text()):
        key.update(part.encode() + b"\0")
    tag = f"{version}-py312-{key.hexdigest()[:12]}"
    archive = dest / f"ray-standin-{tag}.tar"
    name = f"{REGISTRY}/ray-standin:{tag}"
    if archive.exists():
        return Image(name, archive)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        rootfs = Path(tmp) / "rootfs"
        rootfs.mkdir()
        subprocess.run(["tar", "-C", str(rootfs), "-xf", str(_debian(dest))], check=True)
        prefix = rootfs / RAY_PYTHON
        prefix.mkdir(parents=True)
        excludes = [f"--exclude={e}" for e in PYTHON_EXCLUDES]
        pack = subprocess.Popen(
            ["tar", *excludes, "-C", str(python), "-cf", "-", "."], stdout=subprocess.PIPE
        )
        subprocess.run(["tar", "-C", str(prefix), "-xf", "-"], stdin=pack.stdout, check=True)
        if pack.wait() != 0:
            raise SystemExit(f"error: could not copy {python}")
        # This Python's RUNPATH names where it was built: the loader finds libpython by its cache.
        (rootfs / "etc/ld.so.conf.d/python.conf").write_text(f"/{RAY_PYTHON}/lib\n")
        shutil.copyfile(CA_BUNDLE, rootfs / "etc/ssl/certs/ca-certificates.crt")
        with (rootfs / "etc/passwd").open("a") as f:
            f.write("ray:x:1000:100::/home/ray:/bin/bash\n")
        constraints = rootfs / "tmp/constraints.txt"
        constraints.write_text(
            "\n".join(
                ln.removesuffix(" \\")
                for ln in lock.read_text().splitlines()
                if ln and not ln.lstrip().startswith(("#", "--hash"))
            )
        )
        chroot = [shutil.which("chroot") or "/usr/sbin/chroot", str(rootfs)]
        subprocess.run([*chroot, "ldconfig"], check=True)
        env = {"PATH": "/usr/bin:/bin", "PIP_CERT": str(CA_BUNDLE), "HOME": "/root"}
        python_in = f"/{RAY_PYTHON}/bin/python3.12"
        subprocess.run(
            [*chroot, python_in, "-m", "ensurepip", "--default-pip"],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        subprocess.run(
            [
                *chroot,
                f"/{RAY_PYTHON}/bin/python3.12",
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-cache-dir",
                "--no-warn-script-location",
                "-c",
                "/tmp/constraints.txt",
                f"ray[default]=={version}",
            ],
            check=True,
            env=env,
        )
        constraints.unlink()
        subprocess.run(["chown", "-R", "1000:100", str(rootfs / "home/ray")], check=True)
        layer = Path(tmp) / "layer.tar"
        subprocess.run(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(layer), "."], check=True
        )
        path = f"/{RAY_PYTHON}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        config = {
            "Env": [
                f"PATH={path}",
                f"PIP_CERT={CA_BUNDLE}",
                f"SSL_CERT_FILE={CA_BUNDLE}",
                f"REQUESTS_CA_BUNDLE={CA_BUNDLE}",
                "LANG=C.UTF-8",
            ],
            "User": "1000",
            "WorkingDir": "/home/ray",
            "Cmd": ["bash"],
        }
        return _archive_of_file(dest, "ray-standin", tag, layer, config)


if __name__ == "__main__":
    import sys

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".tools/node/images")
    lock = Path(__file__).resolve().parents[2] / "images/launcher/requirements.lock"
    for image in (pause(out), probe(out), ray_base(out, lock)):
        print(image.name, image.archive)
