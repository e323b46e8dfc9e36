"""The node tier's cluster: a control plane of its own (ci/cluster/control_plane.py, named
`tpu-stack-node`, with the real KubeRay operator) and one real node joined to it, on which the
chart's pods run as on GKE's nodes, as far as they and their policies can tell:

- containerd and runc (Debian's), the kubelet of the pinned Kubernetes (cgroup v1 here:
  `failCgroupV1: false`), pods on a CNI bridge (Debian's plugins) with their own addresses;
- kube-proxy (iptables) for Services, CoreDNS for cluster DNS (`*.svc.cluster.local`);
- NetworkPolicy enforced by kube-router's firewall (iptables and ipset on the bridge's traffic);
- the images the pods ask for, built here and imported into containerd (ci/node/images.py);
- a STAND-IN for GKE's gcsfuse CSI driver (ci/node/bucket-csi): a bucket's volume is a
  directory per bucket name in BUCKETS, shared by the pods that mount it.

    python ci/node/node.py up       # idempotent: reuses what runs
    python ci/node/node.py down
    python ci/node/node.py status   # exit 0 when up; prints the kubeconfig path

Root only (a kubelet and containerd change the machine's mounts, cgroups and iptables). Its state
is in /var/lib/tpu-stack-node and /run/tpu-stack-node (images kept between runs), its logs and
pids in .tools/node/run/. The KubeRay operator runs outside the pods, as GKE's hosted one does:
its requests reach the pods from the node's address.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from ci.cluster.control_plane import free_port  # noqa: E402
from ci.cluster.processes import Processes  # noqa: E402
from ci.node import images  # noqa: E402

NAME = "tpu-stack-node"  # the control plane's name and the node's
RUN = ROOT / ".tools" / "node" / "run"
STATE = Path("/var/lib/tpu-stack-node")
SOCKETS = Path("/run/tpu-stack-node")
CONTAINERD_SOCK = SOCKETS / "containerd.sock"
BUCKETS = STATE / "buckets"  # one directory per bucket name: what the stand-in CSI driver mounts
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
BRIDGE = "tsn0"
# The pods' network, apart from the host's, Docker's (172.17/16) and the API server's Services.
POD_CIDR = "10.89.0.0/24"
GATEWAY = "10.89.0.1"
SERVICE_CIDR = "10.0.0.0/24"  # the API server's default (kwokctl sets none)
CONTROL_PLANE = ["env", f"TPU_STACK_CONTROL_PLANE={NAME}", sys.executable]
COMPONENTS = ("containerd", "coredns", "kube-proxy", "kube-router", "bucket-csi", "kubelet")


def control_plane(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CONTROL_PLANE, str(ROOT / "ci" / "cluster" / "control_plane.py"), *args],
        check=check,
        text=True,
        capture_output=True,
    )


def kubeconfig() -> Path:
    return ROOT / ".tools" / "cluster" / f"run-{NAME}" / "kubeconfig"


def build() -> dict[str, Path]:
    names = ["kubernetes", "node-kubernetes", "kube-router", "coredns", "bucket-csi"]
    out = subprocess.run(
        ["bash", str(ROOT / "ci" / "cluster" / "build.sh"), *names],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout.split()
    return dict(zip(names, map(Path, out), strict=True))


def host_ip() -> str:
    """The address the node registers with: the host's own, on its default route."""
    route = subprocess.run(
        ["ip", "-j", "route", "get", "1.1.1.1"], check=True, capture_output=True, text=True
    )
    return json.loads(route.stdout)[0]["prefsrc"]


_processes = Processes(RUN)
start, running, stop = _processes.start, _processes.running, _processes.stop


def wait(what: str, ready, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            sys.exit(f"error: {what} was not ready in {timeout:.0f} s; see {RUN}/*.log")
        time.sleep(0.5)


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def network() -> None:
    """The pods' bridge (made here so that CoreDNS can listen on it before the first pod), and
    what kube-proxy and kube-router need of the kernel: forwarding, and bridged traffic through
    iptables (a NetworkPolicy between two pods on one bridge is enforced there)."""
    if sh("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
    if GATEWAY not in sh("ip", "-4", "addr", "show", BRIDGE).stdout:
        sh("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    for key in ("net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables"):
        sh("sysctl", "-q", "-w", f"{key}=1")
    cni = RUN / "cni"
    cni.mkdir(parents=True, exist_ok=True)
    conflist = {
        "cniVersion": "1.0.0",
        "name": "tpu-stack-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(STATE / "cni-ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    (cni / "10-tpu-stack-node.conflist").write_text(json.dumps(conflist, indent=2))


def start_containerd(pause: images.Image) -> None:
    config = f"""version = 2
root = "{STATE / "containerd"}"
state = "{SOCKETS / "containerd"}"
[grpc]
  address = "{CONTAINERD_SOCK}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause.name}"
  # This machine refuses a negative oom_score_adj (runc: "failed to update
  # /proc/self/oom_score_adj: Permission denied" for the sandbox's -998): none below containerd's.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{RUN / "cni"}"
"""
    (RUN / "containerd.toml").write_text(config)
    SOCKETS.mkdir(parents=True, exist_ok=True)
    start("containerd", ["containerd", "--config", str(RUN / "containerd.toml")])
    wait("containerd", lambda: ctr("version", check=False).returncode == 0)


def ctr(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh("ctr", "--address", str(CONTAINERD_SOCK), "-n", "k8s.io", *args, check=check)


def load_image(image: images.Image) -> None:
    """Imports an image archive into the node's image store, once per name."""
    if image.name not in ctr("images", "ls", "-q").stdout.split():
        ctr("images", "import", "--no-unpack", str(image.archive))


def start_coredns(bins: dict[str, Path], config: Path) -> None:
    corefile = RUN / "Corefile"
    corefile.write_text(
        f"""cluster.local:53 in-addr.arpa:53 {{
    bind {GATEWAY}
    kubernetes cluster.local in-addr.arpa {{
        kubeconfig {config}
        pods insecure
        fallthrough in-addr.arpa
    }}
    cache 5
}}
.:53 {{
    bind {GATEWAY}
    forward . /etc/resolv.conf
}}
"""
    )
    start("coredns", [str(bins["coredns"] / "coredns"), "-conf", str(corefile)])


def start_kube_proxy(bins: dict[str, Path], config: Path) -> None:
    start(
        "kube-proxy",
        [
            str(bins["node-kubernetes"] / "kube-proxy"),
            f"--kubeconfig={config}",
            f"--hostname-override={NAME}",
            f"--cluster-cidr={POD_CIDR}",
            "--proxy-mode=iptables",
            f"--healthz-bind-address=127.0.0.1:{free_port()}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            "--conntrack-max-per-core=0",
        ],
    )


def start_kube_router(bins: dict[str, Path], config: Path) -> None:
    """kube-router as a NetworkPolicy controller only: no routing, no service proxy, no CNI."""
    start(
        "kube-router",
        [
            str(bins["kube-router"] / "kube-router"),
            f"--kubeconfig={config}",
            f"--hostname-override={NAME}",
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--enable-cni=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--health-port={free_port()}",
            "--metrics-port=0",
        ],
    )


def start_bucket_csi(bins: dict[str, Path]) -> None:
    start(
        "bucket-csi",
        [
            str(bins["bucket-csi"] / "bucket-csi"),
            f"--driver-name={GCSFUSE_DRIVER}",
            f"--kubelet-dir={STATE / 'kubelet'}",
            f"--buckets={BUCKETS}",
            f"--node={NAME}",
        ],
    )


def start_kubelet(bins: dict[str, Path], config: Path) -> None:
    kubelet_config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This machine's cgroups are v1: Kubernetes 1.35's kubelet refuses them unless told.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCK}",
        "port": free_port(),
        "readOnlyPort": 0,
        "healthzPort": free_port(),
        "healthzBindAddress": "127.0.0.1",
        # The API server reaches it for logs and exec with no client cert of its own.
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDNS": [GATEWAY],
        "clusterDomain": "cluster.local",
        "failSwapOn": False,
        "maxPods": 60,
        "serializeImagePulls": False,
        # A shared machine's disk and memory: evict only when nearly gone.
        "evictionHard": {
            "memory.available": "200Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "registerWithTaints": [],
    }
    path = RUN / "kubelet-config.yaml"
    path.write_text(yaml.safe_dump(kubelet_config))
    start(
        "kubelet",
        [
            str(bins["node-kubernetes"] / "kubelet"),
            f"--config={path}",
            f"--kubeconfig={config}",
            f"--hostname-override={NAME}",
            f"--node-ip={host_ip()}",
            f"--root-dir={STATE / 'kubelet'}",
            f"--cert-dir={STATE / 'kubelet' / 'pki'}",
        ],
    )


def kubectl(bins: dict[str, Path], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh(
        str(bins["kubernetes"] / "kubectl"), "--kubeconfig", str(kubeconfig()), *args, check=check
    )


def node_ready(bins: dict[str, Path]) -> bool:
    out = kubectl(bins, "get", "node", NAME, "-o", "json", check=False)
    if out.returncode != 0:
        return False
    conditions = json.loads(out.stdout)["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _router_chains() -> int:
    """kube-router's iptables chains (KUBE-ROUTER-*): present once its firewall has synced."""
    rules = sh("iptables-save", "-t", "filter", check=False).stdout
    return sum(line.startswith(":KUBE-ROUTER") for line in rules.splitlines())


def up() -> None:
    if os.geteuid() != 0:
        sys.exit("error: the node tier's node runs as root (containerd, a kubelet, iptables)")
    started = time.monotonic()
    subprocess.run(["bash", str(HERE / "install-deps.sh")], check=True)
    RUN.mkdir(parents=True, exist_ok=True)
    bins = build()
    up_cp = control_plane("up", "--operators", "kuberay-operator", "--without-kwok", check=False)
    if up_cp.returncode != 0:
        sys.exit(
            f"error: the node tier's control plane did not come up:\n{up_cp.stdout}{up_cp.stderr}"
        )
    config = kubeconfig()
    store = STATE / "images"
    pause, probe = images.pause(store), images.probe(store)
    network()
    if not running("containerd"):
        start_containerd(pause)
    for image in (pause, probe):
        load_image(image)
    if not running("coredns"):
        start_coredns(bins, config)
    if not running("kube-proxy"):
        start_kube_proxy(bins, config)
    if not running("bucket-csi"):
        start_bucket_csi(bins)
    if not running("kubelet"):
        start_kubelet(bins, config)
    wait(f"the node {NAME}", lambda: node_ready(bins), timeout=120)
    if not running("kube-router"):  # it reads its node's object: after the kubelet made it
        start_kube_router(bins, config)
        wait("kube-router's policy chains", lambda: _router_chains() > 0, timeout=60)
    (RUN / "images.json").write_text(json.dumps({"pause": pause.name, "probe": probe.name}))
    print(f"node tier up in {time.monotonic() - started:.1f} s; export KUBECONFIG={config}")


def down() -> None:
    for name in ("dockerd", *reversed(COMPONENTS)):  # dockerd: ci/node/launcher_image.py's
        stop(name)
    # What the kubelet left: its pods' containers (containerd is stopped: kill what still runs).
    for proc in sh(
        "pgrep", "-f", "containerd-shim-runc-v2 -namespace k8s.io", check=False
    ).stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(proc), signal.SIGKILL)
    for mount in reversed(Path("/proc/mounts").read_text().splitlines()):
        point = mount.split()[1]
        if point.startswith((str(STATE / "kubelet"), str(SOCKETS))):
            sh("umount", "-l", point, check=False)
    shutil.rmtree(STATE / "kubelet", ignore_errors=True)
    shutil.rmtree(STATE / "cni-ipam", ignore_errors=True)
    sh("ip", "link", "del", BRIDGE, check=False)
    control_plane("down", check=False)


def status() -> int:
    ok = (
        all(running(c) for c in COMPONENTS) and control_plane("status", check=False).returncode == 0
    )
    print(kubeconfig() if ok else "down")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
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
