"""The test control plane: a real Kubernetes API server, scheduler and controller manager on
127.0.0.1 (kwokctl's binary runtime, binaries built from Go modules by build.sh), kwok for fake
nodes, and the real KubeRay operator and JobSet controller running as local processes.

    python ci/cluster/control_plane.py up       # idempotent: reuses a healthy cluster
    python ci/cluster/control_plane.py down
    python ci/cluster/control_plane.py status   # exit 0 when up; prints the kubeconfig path

Everything lives under .tools/cluster/run/ (kwok's workdir, the kubeconfig, operator logs and
pids). On a machine with Docker, `KWOK_RUNTIME=kind` makes kwokctl build the same cluster on kind
instead (its images come from registries); the operators still run as local processes.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUN = ROOT / ".tools" / "cluster" / "run"
NAME = "tpu-stack"
KUBECONFIG = RUN / "kubeconfig"
# Where the API server reaches the JobSet webhooks. On kind (KWOK_RUNTIME=kind) the API server runs
# in a container: set this to the host's address on kind's network (its gateway, e.g. 172.18.0.1).
WEBHOOK_HOST = os.environ.get("JOBSET_WEBHOOK_HOST", "127.0.0.1")
# GKE enables this admission plugin: pods that request google.com/tpu get the toleration for the
# taint GKE puts on TPU nodes (google.com/tpu=present:NoSchedule). The fake nodes carry that taint.
APISERVER_EXTRA_ARGS = ["kube-apiserver=enable-admission-plugins=ExtendedResourceToleration"]
# GKE's gcsfuse CSI driver object (fake: no driver runs here, and under kwok no volume is mounted).
GCSFUSE_CSI_DRIVER = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSIDriver",
    "metadata": {"name": "gcsfuse.csi.storage.gke.io"},
    "spec": {
        "attachRequired": False,
        "podInfoOnMount": True,
        "requiresRepublish": True,
        "volumeLifecycleModes": ["Persistent", "Ephemeral"],
        "tokenRequests": [{"audience": "fake-project.svc.id.goog"}],
        "serviceAccountTokenInSecrets": True,
    },
}


def build() -> dict[str, Path]:
    """Builds (or finds cached) every binary; returns component -> bin dir."""
    names = ["etcd", "kwok", "kubernetes", "kuberay", "jobset"]
    out = subprocess.run(
        ["bash", str(HERE / "build.sh"), *names], check=True, stdout=subprocess.PIPE, text=True
    ).stdout.split()
    return dict(zip(names, map(Path, out), strict=True))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kubectl(bins: dict[str, Path], *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        [str(bins["kubernetes"] / "kubectl"), "--kubeconfig", str(KUBECONFIG), *args],
        input=stdin,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def api_healthy(bins: dict[str, Path]) -> bool:
    if not KUBECONFIG.exists():
        return False
    try:
        kubectl(bins, "get", "--raw", "/readyz", "--request-timeout=5s")
        return True
    except subprocess.CalledProcessError:
        return False


def kwokctl(bins: dict[str, Path], *args: str) -> None:
    env = {**os.environ, "KWOK_WORKDIR": str(RUN / "kwok")}
    subprocess.run([str(bins["kwok"] / "kwokctl"), "--name", NAME, *args], check=True, env=env)


def create_cluster(bins: dict[str, Path]) -> None:
    k8s = bins["kubernetes"]
    runtime = os.environ.get("KWOK_RUNTIME", "binary")
    args = [
        "create",
        "cluster",
        "--runtime",
        runtime,
        "--kubeconfig",
        str(KUBECONFIG),
        "--wait",
        "120s",
        "--disable-qps-limits",
    ]
    stages = RUN / "kwok-stages.yaml"
    stage_files = sorted((bins["kwok"] / "stages").glob("*.yaml"))
    stages.write_text("\n---\n".join(f.read_text() for f in stage_files))
    args += ["--config", str(stages)]
    if runtime == "binary":
        args += [
            "--etcd-binary",
            str(bins["etcd"] / "etcd"),
            "--kube-apiserver-binary",
            str(k8s / "kube-apiserver"),
            "--kube-controller-manager-binary",
            str(k8s / "kube-controller-manager"),
            "--kube-scheduler-binary",
            str(k8s / "kube-scheduler"),
            "--kwok-controller-binary",
            str(bins["kwok"] / "kwok"),
        ]
    for extra in APISERVER_EXTRA_ARGS:
        args += ["--extra-args", extra]
    kwokctl(bins, *args)


def apply_crds(bins: dict[str, Path]) -> None:
    for component in ("kuberay", "jobset"):
        kubectl(
            bins, "apply", "--server-side", "--force-conflicts", "-f", str(bins[component] / "crds")
        )
    for _ in range(100):  # `kubectl wait` errors out while a new CRD has no status yet
        try:
            kubectl(bins, "wait", "--for=condition=Established", "--timeout=30s", "crd", "--all")
            break
        except subprocess.CalledProcessError:
            time.sleep(0.2)
    kubectl(bins, "apply", "-f", "-", stdin=json.dumps(GCSFUSE_CSI_DRIVER))


def start(name: str, argv: list[str]) -> None:
    """Starts a controller in its own session (it outlives this script); pid + log in RUN."""
    log = (RUN / f"{name}.log").open("ab")
    env = {**os.environ, "KUBECONFIG": str(KUBECONFIG)}
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=RUN, start_new_session=True
    )
    (RUN / f"{name}.pid").write_text(str(proc.pid))


def running(name: str) -> bool:
    pid_file = RUN / f"{name}.pid"
    if not pid_file.exists():
        return False
    try:
        os.kill(int(pid_file.read_text()), 0)
        return True
    except (ProcessLookupError, ValueError):
        return False


def stop(name: str) -> None:
    pid_file = RUN / f"{name}.pid"
    if running(name):
        pid = int(pid_file.read_text())
        os.killpg(pid, signal.SIGTERM)
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.killpg(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)


def wait_http_ok(url: str, what: str, timeout: float = 60, **kw) -> None:
    import requests

    deadline = time.monotonic() + timeout
    while True:
        try:
            if requests.get(url, timeout=2, **kw).ok:
                return
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            sys.exit(
                f"error: {what} did not become healthy at {url} in {timeout:.0f} s; see {RUN}/*.log"
            )
        time.sleep(0.3)


def start_kuberay(bins: dict[str, Path]) -> None:
    health = free_port()
    start(
        "kuberay-operator",
        [
            str(bins["kuberay"] / "kuberay-operator"),
            "--kubeconfig",
            str(KUBECONFIG),
            "--enable-leader-election=false",
            "--metrics-addr",
            f"127.0.0.1:{free_port()}",
            "--health-probe-bind-address",
            f"127.0.0.1:{health}",
        ],
    )
    wait_http_ok(f"http://127.0.0.1:{health}/readyz", "the KubeRay operator")


def self_signed_cert(cert_dir: Path) -> bytes:
    """A serving cert for WEBHOOK_HOST (the JobSet webhooks); returns the PEM to trust."""

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"jobset-webhook.{WEBHOOK_HOST}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(WEBHOOK_HOST))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_dir.mkdir(parents=True, exist_ok=True)
    (cert_dir / "tls.crt").write_bytes(pem)
    (cert_dir / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return pem


def jobset_webhooks(jobset_dir: Path, port: int, ca_pem: bytes) -> list[dict]:
    """JobSet's own webhook configurations (with its kustomize patches), pointed at us."""
    webhook_dir = jobset_dir / "webhook"
    configs = list(yaml.safe_load_all((webhook_dir / "manifests.yaml").read_text()))
    patches = {
        "MutatingWebhookConfiguration": "mutating-patch.yaml",
        "ValidatingWebhookConfiguration": "validating-patch.yaml",
    }
    for cfg in configs:
        for op in yaml.safe_load((webhook_dir / "patches" / patches[cfg["kind"]]).read_text()):
            assert op["op"] == "replace" and op["path"].startswith("/webhooks/"), op
            cfg["webhooks"][int(op["path"].rsplit("/", 1)[1])] = op["value"]
        cfg["metadata"]["name"] = f"jobset-{cfg['metadata']['name']}"
        for hook in cfg["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": f"https://{WEBHOOK_HOST}:{port}{path}",
                "caBundle": base64.b64encode(ca_pem).decode(),
            }
    return configs


def start_jobset(bins: dict[str, Path]) -> None:
    port, health = free_port(), free_port()
    cert_dir = RUN / "jobset-certs"
    ca = self_signed_cert(cert_dir)
    # Its webhooks cannot be switched off and its controller relies on their defaulting: serve
    # them on 127.0.0.1 with our cert instead of its in-cluster cert management.
    config = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": port, "host": WEBHOOK_HOST, "certDir": str(cert_dir)},
    }
    (RUN / "jobset-config.yaml").write_text(yaml.safe_dump(config))
    start(
        "jobset-controller",
        [
            str(bins["jobset"] / "jobset-controller"),
            "--config",
            str(RUN / "jobset-config.yaml"),
            "--kubeconfig",
            str(KUBECONFIG),
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            f"127.0.0.1:{health}",
        ],
    )
    wait_http_ok(f"http://127.0.0.1:{health}/readyz", "the JobSet controller")
    kubectl(
        bins,
        "apply",
        "-f",
        "-",
        stdin="\n---\n".join(json.dumps(c) for c in jobset_webhooks(bins["jobset"], port, ca)),
    )


def up() -> None:
    RUN.mkdir(parents=True, exist_ok=True)
    start_time = time.monotonic()
    bins = build()
    if not api_healthy(bins):
        down(quiet=True)
        RUN.mkdir(parents=True, exist_ok=True)
        create_cluster(bins)
    apply_crds(bins)
    if not running("kuberay-operator"):
        start_kuberay(bins)
    if not running("jobset-controller"):
        start_jobset(bins)
    print(
        f"control plane up in {time.monotonic() - start_time:.1f} s; export KUBECONFIG={KUBECONFIG}"
    )


def down(quiet: bool = False) -> None:
    for name in ("jobset-controller", "kuberay-operator"):
        stop(name)
    kwok = sorted((ROOT / ".tools" / "cluster").glob("kwok-*/kwokctl"))
    if kwok and (RUN / "kwok" / "clusters" / NAME).exists():
        subprocess.run(
            [str(kwok[-1]), "--name", NAME, "delete", "cluster", "--kubeconfig", str(KUBECONFIG)],
            env={**os.environ, "KWOK_WORKDIR": str(RUN / "kwok")},
            check=False,
            capture_output=quiet,
        )
    KUBECONFIG.unlink(missing_ok=True)


def status() -> int:
    bins = build()
    ok = api_healthy(bins) and running("kuberay-operator") and running("jobset-controller")
    print(KUBECONFIG if ok else "down")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except subprocess.CalledProcessError as e:
        sys.exit(
            f"error: {' '.join(map(str, e.cmd))} failed (exit {e.returncode}):\n"
            f"{e.stderr or ''}\nlogs: {RUN}"
        )


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["up", "down", "status"])
    args = parser.parse_args(argv)
    if args.command == "up":
        up()
    elif args.command == "down":
        down()
    else:
        return status()
    return 0


if __name__ == "__main__":
    sys.exit(main())
