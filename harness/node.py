"""The node tier's cluster (ci/node/node.py) as its tests and benchmark use it: kubectl on it,
the launcher image in its containerd, a release installed as a user installs one, and a RayJob
followed to its end with the times of its start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness.helm import CHART, helm
from harness.local_ray import tpu_launcher
from harness.paths import REPO
from launcher.client.release.image_tag import of_checkout

NODE = REPO / "ci" / "node" / "node.py"
RUN = REPO / ".tools" / "node" / "run"
REGISTRY = "tpu-stack.local/node"
BUCKETS = Path("/var/lib/tpu-stack-node/buckets")
# The `cpu` preset sized for a 2-core machine that runs other tiers beside it: the head and
# each host ask for a quarter of a core; a host holds JAX, MaxText and the job's workers.
SMALL = [
    *("--set", "ray.head.resources.requests.cpu=250m"),
    *("--set", "ray.head.resources.requests.memory=1Gi"),
    *("--set", "ray.head.resources.limits.memory=3Gi"),
    *("--set", "ray.worker.resources.requests.cpu=250m"),
    *("--set", "ray.worker.resources.requests.memory=1Gi"),
    *("--set", "ray.worker.resources.limits.memory=5Gi"),
]
# The bucket's volume on every part (the STAND-IN CSI driver serves it).
BUCKET = ["--set", "global.gcsfuse.enabled=true"]
# `install`'s GKE target: only its image registry (the node's) and bucket are used here; no
# --cluster: the release goes to the kubeconfig's current context, the node's (a named cluster
# would have to be a GKE context there: launcher.client.kube_context).
TARGET = ["--project", "node-tier", "--location", "us-east5-b"]


RESTRICTED = {
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "runAsGroup": 65534,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
}


def probe_pod(
    name: str, namespace: str, labels: dict, image: str, script: str, never: bool
) -> dict:
    """A pod of the probe image under `restricted` running `script` (once, or kept running)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "restartPolicy": "Never" if never else "Always",
            "automountServiceAccountToken": False,
            "securityContext": RESTRICTED,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "probe",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    "securityContext": CONTAINER,
                    "resources": {"limits": {"cpu": "100m", "memory": "32Mi"}},
                }
            ],
        },
    }


def node(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(NODE), *args], cwd=REPO, text=True, capture_output=True
    )


def launcher_image_name() -> str:
    """The launcher image `install --registry` renders: tagged by the checkout's content."""
    return f"{REGISTRY}/launcher:{of_checkout(REPO).tag(CHART)}"


def build_launcher_image() -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "ci" / "node" / "launcher_image.py"), launcher_image_name()],
        text=True,
        capture_output=True,
    )


def build_vllm_standin() -> str:
    """The STAND-IN vLLM image (ci/node/vllm-standin) built and in the node; returns its name."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "ci" / "node" / "launcher_image.py"), "--vllm-standin"],
        text=True,
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(proc.stdout)
    return proc.stdout.split(": ", 1)[0]


@dataclass(frozen=True)
class NodeCluster:
    kubeconfig: Path
    kubectl_bin: Path
    images: dict[str, str]

    @classmethod
    def running(cls) -> NodeCluster:
        kubeconfig = Path(node("status").stdout.strip())
        kubectl = next((REPO / ".tools" / "cluster").glob("kubernetes-*/kubectl"))
        return cls(kubeconfig, kubectl, json.loads((RUN / "images.json").read_text()))

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            [str(self.kubectl_bin), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            text=True,
            capture_output=True,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}:\n{proc.stdout}{proc.stderr}")
        return proc.stdout

    def apply(self, *objects: dict) -> None:
        self.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))

    def get(self, kind: str, name: str, namespace: str) -> dict | None:
        out = self.kubectl("-n", namespace, "get", kind, name, "-o", "json", check=False)
        return json.loads(out) if out else None

    def pods(self, namespace: str) -> list[dict]:
        return json.loads(self.kubectl("-n", namespace, "get", "pods", "-o", "json"))["items"]

    def wait(self, what: str, check, timeout: float = 120, explain=lambda: "") -> object:
        deadline = time.monotonic() + timeout
        while not (result := check()):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout:.0f} s waiting for {what}\n{explain()}"
                )
            time.sleep(0.5)
        return result

    def namespace(self, name: str) -> None:
        """A namespace where Pod Security Admission enforces `restricted`, as a platform team's
        shared cluster would."""
        labels = {f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "warn")}
        meta = {"name": name, "labels": labels}
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})

    def user_env(self, bin_dir: Path, state: Path) -> dict[str, str]:
        """A user's shell: helm and kubectl on PATH, this cluster their kubeconfig."""
        for tool in (helm(3), self.kubectl_bin):
            if not (bin_dir / tool.name).exists():
                (bin_dir / tool.name).symlink_to(tool)
        return {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "KUBECONFIG": str(self.kubeconfig),
            "LAUNCHER_STATE_DIR": str(state),
        }

    def install(
        self, env: dict[str, str], namespace: str, bucket: str, *sets: str, values: str = "cpu"
    ):
        """`tpu-launcher install --values VALUES` (a preset or a file) into `namespace`; the
        `cpu` preset sized for this machine."""
        where = ["--release", "tpu", "--namespace", namespace]
        target = [*TARGET, "--registry", REGISTRY, "--bucket", bucket]
        sized = SMALL if values == "cpu" else []
        return tpu_launcher(
            "install",
            "--values",
            values,
            *where,
            *target,
            *BUCKET,
            *sized,
            *sets,
            env=env,
            timeout=300,
        )

    @staticmethod
    def helm_test(env: dict[str, str], namespace: str) -> subprocess.CompletedProcess:
        """`helm test` of the release `tpu`, with its pods' logs, as a user runs it."""
        return subprocess.run(
            [str(helm(3)), "test", "tpu", "-n", namespace, "--logs", "--timeout", "10m"],
            env=env,
            text=True,
            capture_output=True,
        )

    def uninstall(self, env: dict[str, str], namespace: str) -> None:
        """The release `tpu` uninstalled and its namespace deleted (not waited for)."""
        subprocess.run(
            [str(helm(3)), "uninstall", "tpu", "-n", namespace, "--wait", "--timeout", "120s"],
            env=env,
            capture_output=True,
        )
        self.kubectl("delete", "namespace", namespace, "--wait=false", check=False)

    def ready_ray_pods(self, namespace: str) -> int:
        ray = [
            p
            for p in self.pods(namespace)
            if p["metadata"]["labels"].get("app.kubernetes.io/name") == "kuberay"
        ]
        return sum(_ready(p) for p in ray)

    def describe(self, namespace: str) -> str:
        return self.kubectl("-n", namespace, "describe", "pods", check=False)[-6000:]

    def http_status(
        self,
        namespace: str,
        name: str,
        address: str,
        path: str,
        header: str = "",
        tries: int = 12,
    ) -> tuple[str, str]:
        """`open` (HTTP 200), `refused-by-server` (HTTP 401) or `no-answer` (the connection
        not made, refused by a policy, or nothing said), as a pod in `namespace` sees GET
        http://address<path> (address `ip:port`), with one more request header if given; and
        the answer's first line. kube-router refuses what no policy admits with ICMP's port
        unreachable (nc: "Connection refused"), and a new pod's address reaches its sets only
        with its next full sync, which here has come 30 s and more after the pod started (it
        syncs on every pod's event, the RayService's probes among them; GKE's dataplane is
        eventually consistent too): a request not answered is tried again, `tries` times about
        5 s apart, so `no-answer` means none of them was, and a pod wrongly admitted is
        answered within the window."""
        request = f"GET {path} HTTP/1.0\\r\\n" + (f"{header}\\r\\n" if header else "") + "\\r\\n"
        host, port = address.rsplit(":", 1)
        script = (
            f"i=0; while [ $i -lt {tries} ]; do "
            f'out=$(printf "{request}" | nc -w 4 {host} {port} | head -1); '
            '[ -n "$out" ] && break; i=$((i+1)); sleep 1; done; echo "$out"; '
            'case "$out" in *" 401 "*) exit 3;; *" 200 "*) exit 0;; *) exit 4;; esac'
        )
        self.apply(
            probe_pod(name, namespace, {"app": "probe"}, self.images["probe"], script, never=True)
        )

        def ended():
            pod = self.get("pod", name, namespace) or {}
            for c in pod.get("status", {}).get("containerStatuses", []):
                if term := c.get("state", {}).get("terminated"):
                    return term["exitCode"] + 1  # 0 is falsy
            return None

        # Each request takes at most 5 s (nc's 4 s and the pause): the pod's start beside them.
        code = self.wait(f"the probe {name}", ended, timeout=60 + 5 * tries) - 1
        said = self.kubectl("-n", namespace, "logs", name, check=False)
        self.kubectl("-n", namespace, "delete", "pod", name, "--wait=false")
        return {0: "open", 3: "refused-by-server"}.get(code, "no-answer"), said

    @contextmanager
    def without_policies(self, namespace: str) -> Iterator[None]:
        """The namespace's NetworkPolicies taken out for the block, then put back as they were."""
        policies = json.loads(self.kubectl("-n", namespace, "get", "networkpolicy", "-o", "json"))
        self.kubectl("-n", namespace, "delete", "networkpolicy", "--all")
        try:
            yield
        finally:
            restored = policies["items"]
            for p in restored:
                for key in ("resourceVersion", "uid", "creationTimestamp", "generation"):
                    p["metadata"].pop(key, None)
                p["metadata"].pop("managedFields", None)
            self.apply(*restored)

    def once_policies_are_out(
        self, namespace: str, name: str, address: str, path: str
    ) -> tuple[str, str]:
        """`http_status` from `namespace` once kube-router has taken out the rules of policies
        just deleted (within its sync: until then the connection is still not made): the
        probe's own retries, for five minutes."""
        return self.http_status(namespace, name, address, path, tries=60)


def _ready(pod: dict) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def follow_rayjob(cluster: NodeCluster, namespace: str, name: str, timeout: float = 900) -> dict:
    """Follows a RayJob to its end. Returns its status and its start's parts, in seconds: the
    pod's start (the RayJob made to its head's container running: KubeRay's cluster, the
    scheduler, the sandbox, the image), Ray's start (to the head Ready: `ray start` and
    KubeRay's probes), and the job's own start-up (to its first step in the submitter's log:
    the submission, the JaxTrainer's workers, MaxText's compile and first step)."""
    seen: dict = {"first_step": None, "head": {}}

    def ended() -> bool:
        job = cluster.get("rayjob", name, namespace) or {}
        seen["job"] = job
        for pod in cluster.pods(namespace):
            labels = pod["metadata"]["labels"]
            if labels.get("ray.io/node-type") == "head":
                seen["head"] = pod
            submitter = labels.get("app.kubernetes.io/component") == "ray-job-submitter"
            if submitter and seen["first_step"] is None:
                log = cluster.kubectl("-n", namespace, "logs", pod["metadata"]["name"], check=False)
                if "[progress] step 1/" in log:
                    seen["first_step"] = time.time()
        return job.get("status", {}).get("jobDeploymentStatus") in ("Complete", "Failed")

    cluster.wait(
        f"the RayJob {name} to end", ended, timeout, explain=lambda: cluster.describe(namespace)
    )
    created = _time(seen["job"]["metadata"]["creationTimestamp"])
    head = seen["head"].get("status", {})
    running = [
        s["state"]["running"] for s in head.get("containerStatuses", []) if "running" in s["state"]
    ]
    ready = [
        c for c in head.get("conditions", []) if c["type"] == "Ready" and c["status"] == "True"
    ]
    started = _time(running[0]["startedAt"]) if running else None
    up = _time(ready[0]["lastTransitionTime"]) if ready else None
    first = seen["first_step"]
    return {
        "status": seen["job"]["status"],
        "pod_start_s": started - created if started else None,
        "ray_start_s": up - started if up and started else None,
        "job_start_s": first - up if first and up else None,
        "to_first_step_s": first - created if first else None,
    }
