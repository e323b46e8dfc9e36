"""The test control plane: a real Kubernetes API server, scheduler and controller manager on
127.0.0.1 (kwokctl's binary runtime, binaries built from Go modules by build.sh), kwok for fake
nodes, and the real KubeRay operator, JobSet controller and Kueue (its RayJob and RayCluster
integrations) running as local processes.

    python ci/cluster/control_plane.py up       # idempotent: reuses a healthy cluster
    python ci/cluster/control_plane.py down
    python ci/cluster/control_plane.py status   # exit 0 when up; prints the kubeconfig path

TPU_STACK_CONTROL_PLANE=NAME names another one (its own state in .tools/cluster/run-NAME/).

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
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

# Run as a script (`python ci/cluster/control_plane.py`), the checkout's root is not on the path.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from ci.cluster.processes import Processes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# One control plane per name: the cluster tier's (kwok's nodes), and the node tier's, whose one
# node is real (ci/node/node.py): apart, so that neither tier's pods land on the other's nodes.
NAME = os.environ.get("TPU_STACK_CONTROL_PLANE", "tpu-stack")
RUN = ROOT / ".tools" / "cluster" / ("run" if NAME == "tpu-stack" else f"run-{NAME}")
KUBECONFIG = RUN / "kubeconfig"
OPERATORS = ("kuberay-operator", "jobset-controller", "kueue-controller")
# Where the API server reaches the JobSet webhooks. On kind (KWOK_RUNTIME=kind) the API server runs
# in a container: set this to the host's address on kind's network (its gateway, e.g. 172.18.0.1).
WEBHOOK_HOST = os.environ.get("JOBSET_WEBHOOK_HOST", "127.0.0.1")
# GKE enables this admission plugin: pods that request google.com/tpu get the toleration for the
# taint GKE puts on TPU nodes (google.com/tpu=present:NoSchedule). The fake nodes carry that taint.
# One scheduler and one controller manager, so no leader election: with it, each exits for good
# ("leaderelection lost") when the API server misses a lease renewal's 5 s deadline, as it does
# on two cores while the e2e tier starts its Ray cluster beside the cluster tier; pods then stay
# Pending and namespaces Terminating for the rest of the run (CI at 5683bf6, kube-scheduler.log).
EXTRA_ARGS = [
    "kube-apiserver=enable-admission-plugins=ExtendedResourceToleration",
    "kube-scheduler=leader-elect=false",
    "kube-controller-manager=leader-elect=false",
    # A real node (the node tier's) is reached by its address: its hostname is in no DNS here.
    "kube-apiserver=kubelet-preferred-address-types=InternalIP,Hostname",
]
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
    names = ["etcd", "kwok", "kubernetes", "kuberay", "jobset", "kueue", "lws"]
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
    """The API server answers and every control loop kwokctl started still runs (a cluster
    whose scheduler or controller manager died is made again, not reused)."""
    if not KUBECONFIG.exists():
        return False
    pids = RUN / "kwok" / "clusters" / NAME / "pids"
    loops = ["kube-scheduler", "kube-controller-manager"] + (["kwok-controller"] * _with_kwok())
    for loop in loops:
        try:
            os.kill(int((pids / f"{loop}.pid").read_text()), 0)
        except (OSError, ValueError):
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
    for extra in EXTRA_ARGS:
        args += ["--extra-args", extra]
    if not _with_kwok():  # real nodes only: kwok would take them over
        args += ["--disable", "kwok-controller"]
    kwokctl(bins, *args)


def apply_crds(bins: dict[str, Path]) -> None:
    for component in ("kuberay", "jobset", "kueue", "lws"):
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


# Controllers in their own sessions (they outlive this script); pid + log in RUN.
_processes = Processes(RUN, {"KUBECONFIG": str(KUBECONFIG)})
start, running = _processes.start, _processes.running


def stop(name: str) -> None:
    _processes.stop(name, grace_s=5)


def start_configured(name: str, binary: Path, config: dict, *args: str) -> None:
    """Starts a controller-runtime controller with its Configuration file (RUN/<name>.yaml)."""
    path = RUN / f"{name}-config.yaml"
    path.write_text(yaml.safe_dump(config))
    start(name, [str(binary), "--config", str(path), *args])


def apply_objects(bins: dict[str, Path], objects: list[dict]) -> None:
    kubectl(bins, "apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))


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
            # Real nodes' heads are reached through the API server's proxy: this process is off
            # the pod network and its cluster DNS (on kwok's nodes no head answers at all).
            *([] if _with_kwok() else ["--use-kubernetes-proxy"]),
        ],
    )
    wait_http_ok(f"http://127.0.0.1:{health}/readyz", "the KubeRay operator")


def self_signed_cert(cert_dir: Path, name: str = "jobset-webhook") -> bytes:
    """A serving cert for WEBHOOK_HOST (a controller's webhooks); returns the PEM to trust."""

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}.{WEBHOOK_HOST}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
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
    start_configured(
        "jobset-controller",
        bins["jobset"] / "jobset-controller",
        config,
        *("--kubeconfig", str(KUBECONFIG), "--metrics-bind-address", "0"),
        *("--health-probe-bind-address", f"127.0.0.1:{health}"),
    )
    wait_http_ok(f"http://127.0.0.1:{health}/readyz", "the JobSet controller")
    apply_objects(bins, jobset_webhooks(bins["jobset"], port, ca))


# Kueue's integrations here: KubeRay's RayJob and RayCluster (the chart's two ways to run Ray).
KUEUE_FRAMEWORKS = ["ray.io/rayjob", "ray.io/raycluster"]
# The CRDs whose v1beta1 (stored) and v1beta2 (Kueue's own) versions its webhook converts.
KUEUE_CONVERTED = ["localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"]


def _pointed_at(clientconfig: dict, port: int, ca_pem: bytes) -> dict:
    path = clientconfig["service"]["path"]
    return {
        "url": f"https://{WEBHOOK_HOST}:{port}{path}",
        "caBundle": base64.b64encode(ca_pem).decode(),
    }


def kueue_webhooks(kueue_dir: Path, port: int, ca_pem: bytes) -> list[dict]:
    """Kueue's webhook configurations, pointed at us, for its own kinds and KubeRay's only:
    the others (Jobs, Pods, Deployments, ...) would send every such object of the cluster to
    a controller that does not serve them."""
    configs = list(yaml.safe_load_all((kueue_dir / "webhook" / "manifests.yaml").read_text()))
    for cfg in configs:
        cfg["metadata"]["name"] = f"kueue-{cfg['metadata']['name']}"
        cfg["webhooks"] = [
            {**hook, "clientConfig": _pointed_at(hook["clientConfig"], port, ca_pem)}
            for hook in cfg["webhooks"]
            if {g for r in hook["rules"] for g in r["apiGroups"]} <= {"ray.io", "kueue.x-k8s.io"}
        ]
    return configs


# Kueue's internal certificate management (its defaults): it keeps the serving cert in this
# Secret and injects the CA into these webhook configurations and its CRDs' conversion.
KUEUE_NAMESPACE = "kueue-system"
KUEUE_SERVICE_DNS = f"kueue-webhook-service.{KUEUE_NAMESPACE}.svc"
KUEUE_CERT_SECRET = "kueue-webhook-server-cert"
KUEUE_CA_NAME = "kueue-ca"


def kueue_certs(cert_dir: Path) -> tuple[bytes, dict[str, str]]:
    """A CA and a serving cert as Kueue's cert rotator would make them (the CA valid for its
    CA name, the cert for its Service's DNS name), the cert also valid for WEBHOOK_HOST, where
    the API server reaches it here; ten years, so the rotator keeps them instead of making new
    ones without our address. Kueue without its cert management reads its metrics cert from a
    fixed /etc path. Returns the CA's PEM and the Secret's data."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def pem_key(key) -> bytes:  # PKCS#1: the rotator reads the CA key with ParsePKCS1PrivateKey
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )

    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=3650))
    ca_key, key = (rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in "ab")
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, KUEUE_CA_NAME)])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(KUEUE_CA_NAME)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    sans = [x509.DNSName(KUEUE_SERVICE_DNS), x509.IPAddress(ipaddress.ip_address(WEBHOOK_HOST))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, KUEUE_SERVICE_DNS)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem, cert_pem = (
        ca.public_bytes(serialization.Encoding.PEM),
        cert.public_bytes(serialization.Encoding.PEM),
    )
    cert_dir.mkdir(parents=True, exist_ok=True)
    (cert_dir / "tls.crt").write_bytes(cert_pem)
    (cert_dir / "tls.key").write_bytes(pem_key(key))
    data = {
        "ca.crt": ca_pem,
        "ca.key": pem_key(ca_key),
        "tls.crt": cert_pem,
        "tls.key": pem_key(key),
    }
    return ca_pem, {k: base64.b64encode(v).decode() for k, v in data.items()}


def start_kueue(bins: dict[str, Path]) -> None:
    port, health = free_port(), free_port()
    cert_dir = RUN / "kueue-certs"
    ca, secret = kueue_certs(cert_dir)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}}
    meta = {"name": KUEUE_CERT_SECRET, "namespace": KUEUE_NAMESPACE}
    apply_objects(bins, [namespace])  # before what goes in it
    apply_objects(bins, [{"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": secret}])
    # Its stored API version is v1beta1, its own v1beta2: the CRDs' conversion goes to us too.
    for crd in KUEUE_CONVERTED:
        conversion = {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": _pointed_at({"service": {"path": "/convert"}}, port, ca),
                "conversionReviewVersions": ["v1"],
            },
        }
        kubectl(
            bins,
            "patch",
            "crd",
            f"{crd}.kueue.x-k8s.io",
            "--type=merge",
            "-p",
            json.dumps({"spec": {"conversion": conversion}}),
        )
    # Registered before it starts: its cert rotator waits to inject the CA into them.
    apply_objects(bins, kueue_webhooks(bins["kueue"], port, ca))
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": port, "host": WEBHOOK_HOST, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": True},
        "integrations": {"frameworks": KUEUE_FRAMEWORKS},
    }
    start_configured(
        "kueue-controller",
        bins["kueue"] / "kueue-controller",
        config,
        # Its on-demand visibility API is an aggregated API server of its own: not needed.
        "--feature-gates=VisibilityOnDemand=false",
    )
    wait_http_ok(f"http://127.0.0.1:{health}/readyz", "the Kueue controller", timeout=120)


def up(operators: tuple[str, ...] = OPERATORS, kwok: bool = True) -> None:
    RUN.mkdir(parents=True, exist_ok=True)
    (RUN / "operators").write_text(" ".join(operators))
    marker = RUN / "without-kwok"
    if kwok:
        marker.unlink(missing_ok=True)
    else:
        marker.touch()
    start_time = time.monotonic()
    bins = build()
    if not api_healthy(bins):
        down(quiet=True)
        RUN.mkdir(parents=True, exist_ok=True)
        create_cluster(bins)
    apply_crds(bins)
    starters = {
        "kuberay-operator": start_kuberay,
        "jobset-controller": start_jobset,
        "kueue-controller": start_kueue,
    }
    for name in operators:
        if not running(name):
            starters[name](bins)
    print(
        f"control plane up in {time.monotonic() - start_time:.1f} s; export KUBECONFIG={KUBECONFIG}"
    )


def down(quiet: bool = False) -> None:
    for name in reversed(OPERATORS):
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
    ok = api_healthy(bins) and all(running(c) for c in _operators())
    print(KUBECONFIG if ok else "down")
    return 0 if ok else 1


def _with_kwok() -> bool:
    """Whether kwok's controller runs here (the fake nodes); `up --without-kwok` says not."""
    return not (RUN / "without-kwok").exists()


def _operators() -> tuple[str, ...]:
    """The operators `up` started here (all unless told fewer)."""
    chosen = RUN / "operators"
    return tuple(chosen.read_text().split()) if chosen.exists() else OPERATORS


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
    parser.add_argument(
        "--operators",
        default=",".join(OPERATORS),
        help=f"with up: which of {', '.join(OPERATORS)} to run (comma-separated; default all)",
    )
    parser.add_argument(
        "--without-kwok",
        action="store_true",
        help="with up: no kwok controller (a cluster of real nodes only)",
    )
    args = parser.parse_args(argv)
    if args.command == "up":
        chosen = tuple(o for o in args.operators.split(",") if o)
        if unknown := set(chosen) - set(OPERATORS):
            parser.error(f"--operators: unknown {sorted(unknown)}; choose from {OPERATORS}")
        up(chosen, kwok=not args.without_kwok)
    elif args.command == "down":
        down()
    else:
        return status()
    return 0


if __name__ == "__main__":
    sys.exit(main())
