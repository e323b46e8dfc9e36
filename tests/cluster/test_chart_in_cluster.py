"""helm install / test / upgrade / uninstall of the chart in the real control plane."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pykube
import pytest
from pytest_helm_charts.k8s.deployment import wait_for_deployments_to_run

from ci.cluster import gke_nodes
from harness.kube import Release, dump, ray_clusters, ready, wait_for
from harness.paths import REPO
from launcher.core.tpu.table import GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL, tpu_type
from launcher.core.values_file import tpu_slices
from launcher.runtime.cluster.check import webhook_problems

pytestmark = pytest.mark.cluster

VALUES = REPO / "values"
WORKER = {"ray.io/node-type": "worker"}
HEAD = {"ray.io/node-type": "head"}


def wait_ready(rel: Release, timeout: float = 60) -> float:
    """Seconds until the RayCluster reports ready."""
    start = time.monotonic()
    wait_for(
        "the RayCluster to become ready",
        lambda: ready(rel.raycluster()),
        timeout,
        explain=lambda: dump(rel.raycluster().get("status")) + "\n" + rel.events(),
    )
    return time.monotonic() - start


def name_of(rel: Release) -> str:
    return rel.raycluster()["metadata"]["name"]


def policy_selection(rel: Release) -> dict[str, tuple[set[str], list[set[str]]]]:
    """Per NetworkPolicy of the release: the pods its podSelector selects, and per ingress rule
    the pods its podSelector peers select, as the API server matches the labels."""

    def pods(selector: dict) -> set[str]:
        return {p.name for p in rel.pods(**selector["matchLabels"])}

    found = {}
    policies = pykube.object_factory(rel.api, "networking.k8s.io/v1", "NetworkPolicy")
    for policy in policies.objects(rel.api).filter(namespace=rel.namespace):
        spec = policy.obj["spec"]
        peers = [
            set().union(
                *(pods(peer["podSelector"]) for peer in rule["from"] if "podSelector" in peer)
            )
            for rule in spec.get("ingress", [])
        ]
        found[policy.name] = (pods(spec["podSelector"]), peers)
    return found


def node_labels(rel: Release, pod: pykube.Pod) -> dict:
    return pykube.Node.objects(rel.api).get(name=pod.obj["spec"]["nodeName"]).labels


# Every values file with Ray, each into a namespace that enforces Pod Security's `restricted`.
@pytest.mark.parametrize(
    "values",
    sorted(p.name for p in VALUES.glob("*.yaml") if gke_nodes.merged_values(p)["ray"]["enabled"]),
)
def test_install_brings_the_raycluster_to_ready(release: Release, values: str):
    values_file = VALUES / values
    release.add_nodes_for(values_file)
    merged = gke_nodes.merged_values(values_file)
    slices = tpu_slices(merged).get("ray")
    if slices:
        shape, expected_workers = slices.shape, slices.shape.hosts * slices.num_slices
    else:
        shape, expected_workers = None, merged["ray"]["worker"]["cpu"]["hosts"]

    start = time.monotonic()
    release.install(values_file)
    waited = wait_ready(release, timeout=60)
    print(
        f"\n{values}: helm install -> RayCluster ready in {time.monotonic() - start:.1f} s "
        f"(ready {waited:.1f} s after install returned)"
    )

    heads, workers = release.pods(**HEAD), release.pods(**WORKER)
    ray_pods = {p.name for p in heads + workers}
    # Ray's pods reach each other on any port; the dashboard and client ports also helm test's.
    assert policy_selection(release) == {
        name_of(release): (ray_pods, [ray_pods, set()]),
        f"{release.name}-tests": (set(), []),  # helm test's pods, when they run: no ingress
    }
    assert len(heads) == 1
    assert len(workers) == expected_workers
    for pod in heads + workers:
        assert pod.obj["status"]["phase"] == "Running", dump(pod.obj["status"])
    worker_nodes = [pod.obj["spec"]["nodeName"] for pod in workers]
    assert len(set(worker_nodes)) == len(worker_nodes), "two hosts of the slice share a node"
    for pod in workers:
        labels = node_labels(release, pod)
        if shape:
            assert labels[GKE_TOPOLOGY_LABEL] == shape.topology
            assert labels[GKE_ACCELERATOR_LABEL] == shape.generation.gke_accelerator
        else:
            assert GKE_TOPOLOGY_LABEL not in labels
    assert GKE_TOPOLOGY_LABEL not in node_labels(release, heads[0])  # head off the TPU hosts

    name = release.raycluster()["metadata"]["name"]
    services = {
        s.name: s.obj
        for s in pykube.Service.objects(release.api).filter(namespace=release.namespace)
    }
    assert f"{name}-head-svc" in services, sorted(services)
    assert services[f"{name}-head-svc"]["spec"]["type"] == "ClusterIP"
    if shape is None or shape.multi_host:
        # KubeRay makes the headless service that multi-host workers resolve each other by.
        assert services[f"{name}-headless"]["spec"]["clusterIP"] == "None", sorted(services)
    else:
        # ...and only for them: why the chart refuses several single-host slices (the TPU
        # webhook's multi-slice coordinator address names this Service).
        assert f"{name}-headless" not in services, sorted(services)


def test_helm_test_pod_targets_the_head(release: Release):
    """`helm test` runs `python -m launcher.runtime cluster-check` in a pod; under kwok no container
    runs, so the check itself cannot pass or fail here (it is exercised against a live local Ray
    cluster in tests/e2e). What is checked: helm creates the test pod, it is scheduled, and it
    points at the head service that exists, with the expected node count and the auth token's
    secret."""
    release.add_nodes_for(VALUES / "v6e-16.yaml")
    release.install(VALUES / "v6e-16.yaml")
    wait_ready(release)
    proc = release.helm("test", release.name, "--timeout", "10s", check=False)
    assert proc.returncode != 0 and "timed out" in (proc.stdout + proc.stderr), (
        "the test pod cannot complete under kwok; if it did, something else ran it:\n"
        + proc.stdout
        + proc.stderr
    )
    cluster = release.raycluster()["metadata"]["name"]
    test_pod = (
        pykube.Pod.objects(release.api)
        .filter(namespace=release.namespace)
        .get(name=f"{cluster}-test")
    )
    assert test_pod.obj["spec"].get("nodeName"), "the test pod was not scheduled"
    command = test_pod.obj["spec"]["containers"][0]["command"]
    assert f"--address=http://{cluster}-head-svc:8265" in command
    assert "--expect-nodes=5" in command  # head + 4 hosts
    pykube.Service.objects(release.api).filter(namespace=release.namespace).get(
        name=f"{cluster}-head-svc"
    )
    env = {e["name"]: e for e in test_pod.obj["spec"]["containers"][0]["env"]}
    secret = env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]["name"]
    pykube.Secret.objects(release.api).filter(namespace=release.namespace).get(name=secret)

    # The check's own identity reads the release's pods, as it does in the pod (same request,
    # same token kind), and from what KubeRay created here, with no TPU webhook in this control
    # plane, it names the missing webhook.
    assert f"--ray-cluster={cluster}" in command
    account = test_pod.obj["spec"]["serviceAccountName"]
    assert account == f"{cluster}-test"
    api = release.as_account(account)
    pods = api.pods(f"ray.io/cluster={cluster}")
    workers = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
    assert len(workers) == 4
    (problem,) = webhook_problems(pods)
    assert "4 multi-host TPU worker pod(s)" in problem and "no TPU_WORKER_HOSTNAMES" in problem
    # ...and nothing beyond pods: the account may not read the auth Secret.
    with pytest.raises(urllib.error.HTTPError, match="403"):
        _read(api.server, api.token, api.ca_file, api.namespace, f"secrets/{secret}")


def _read(api: str, token: str, ca: str, namespace: str, what: str) -> dict:
    request = urllib.request.Request(
        f"{api}/api/v1/namespaces/{namespace}/{what}", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=ca)) as r:
        return json.load(r)


# The KubeRay TPU webhook's registration name and, in its Deployment, its image (whose tag is its
# version), as the webhook's own Helm chart installs them. This control plane has no webhook:
# the two objects below are a FAKE of what NOTES looks up; the registration selects no pod, so
# nothing ever calls it.
FAKE_WEBHOOK_IMAGE = "us-docker.pkg.dev/ai-on-gke/kuberay-tpu-webhook/tpu-webhook:v{}-gke.0"


def _fake_webhook(release: Release, namespace: str, version: str) -> None:
    manifests = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "kuberay-tpu-webhook", "namespace": namespace},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "kuberay-tpu-webhook"}},
                "template": {
                    "metadata": {"labels": {"app": "kuberay-tpu-webhook"}},
                    "spec": {
                        "containers": [
                            {"name": "webhook", "image": FAKE_WEBHOOK_IMAGE.format(version)}
                        ]
                    },
                },
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "kuberay-tpu-mutating-webhook-cfg"},
            "webhooks": [
                {
                    "name": "mutate-pods.tpu-webhook.fake",
                    "clientConfig": {
                        "service": {
                            "namespace": namespace,
                            "name": "kuberay-tpu-webhook",
                            "path": "/mutate",
                        }
                    },
                    "objectSelector": {"matchLabels": {"fake-tpu-webhook": "selects-nothing"}},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ],
                    "failurePolicy": "Ignore",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        },
    ]
    subprocess.run(
        [*release.kubectl(), "apply", "-f", "-"],
        input="\n---\n".join(json.dumps(m) for m in manifests),
        capture_output=True,
        text=True,
        check=True,
    )


def test_notes_name_a_missing_or_too_old_tpu_webhook(release: Release):
    release.add_nodes_for(VALUES / "v6e-16.yaml")
    notes = release.install(VALUES / "v6e-16.yaml").stdout
    assert "WARNING: this cluster has no KubeRay TPU webhook" in notes
    webhook_ns = f"{release.namespace}-tpu-webhook"
    try:
        _fake_webhook(release, webhook_ns, "1.2.5")
        notes = release.upgrade(VALUES / "v6e-16.yaml").stdout
        assert "WARNING: the KubeRay TPU webhook is v1.2.5" in notes
        assert "Upgrade it to v1.3.2 or newer" in notes
        _fake_webhook(release, webhook_ns, "1.3.5")
        notes = release.upgrade(VALUES / "v6e-16.yaml").stdout
        assert "TPU webhook" not in notes, notes
    finally:
        subprocess.run(
            [
                *release.kubectl(),
                "delete",
                "mutatingwebhookconfiguration",
                "kuberay-tpu-mutating-webhook-cfg",
                "--ignore-not-found",
            ],
            capture_output=True,
        )
        subprocess.run(
            [*release.kubectl(), "delete", "namespace", webhook_ns, "--wait=false"],
            capture_output=True,
        )


def test_saxml_jobset_deployments_and_load_balancer(release: Release):
    values_file = VALUES / "v5e-32-saxml.yaml"
    release.add_nodes_for(values_file)
    # Off the host network (the chart's default; the tutorial's servers use it, which only
    # `privileged` admits), Saxml's pods meet `baseline`: every one is admitted.
    release.pod_security("baseline")
    release.install(values_file)
    ns = release.namespace
    jobsets = pykube.object_factory(release.api, "jobset.x-k8s.io/v1alpha2", "JobSet")
    (jobset,) = jobsets.objects(release.api).filter(namespace=ns)

    def jobs():
        return [j.obj for j in pykube.Job.objects(release.api).filter(namespace=ns)]

    wait_for(
        "one Job per slice",
        lambda: len(jobs()) == 2,
        60,
        explain=lambda: dump(jobset.obj.get("status")) + release.events(),
    )
    shape = tpu_type("v5litepod-32")
    for job in jobs():
        assert job["spec"]["parallelism"] == job["spec"]["completions"] == shape.hosts
    # The JobSet's headless service gives every host a stable DNS name.
    service = pykube.Service.objects(release.api).filter(namespace=ns).get(name=jobset.name)
    assert service.obj["spec"]["clusterIP"] == "None"

    # Every model-server pod landed on its own v5e 4x8 host.
    def placed():
        pods = release.pods(**{"jobset.sigs.k8s.io/jobset-name": jobset.name})
        return (
            len(pods) == 2 * shape.hosts
            and all(p.obj["spec"].get("nodeName") for p in pods)
            and pods
        )

    pods = wait_for("the model servers to be scheduled", placed, 60, explain=release.events)
    assert len({p.obj["spec"]["nodeName"] for p in pods}) == len(pods)
    for pod in pods:
        assert node_labels(release, pod)[GKE_TOPOLOGY_LABEL] == "4x8"

    deployments = [d.name for d in pykube.Deployment.objects(release.api).filter(namespace=ns)]
    assert len(deployments) == 2, deployments  # admin + HTTP
    wait_for_deployments_to_run(release.api, deployments, ns, timeout_sec=60)

    (lb,) = [
        s.obj
        for s in pykube.Service.objects(release.api).filter(namespace=ns)
        if s.obj["spec"]["type"] == "LoadBalancer"
    ]
    assert lb["metadata"]["annotations"]["networking.gke.io/load-balancer-type"] == "Internal"
    # No cloud controller here gives it an address (that part is GKE's).
    assert lb["spec"]["ports"][0]["nodePort"] > 0

    # The NetworkPolicies select what they mean to, as the API server reads their selectors:
    # each server admits the other Saxml parts; the HTTP server also helm test's pods and the
    # load balancer's range.
    admin, http = (
        {p.name for p in release.pods(**{"app.kubernetes.io/component": c})}
        for c in ("saxml-admin", "saxml-http")
    )
    models = {p.name for p in pods}
    assert policy_selection(release) == {
        "tpu-saxml-admin": (admin, [models | http]),
        "tpu-saxml-model": (models, [models, admin | http]),
        "tpu-saxml-http": (http, [set()]),  # helm test's pods, none now; and 10.0.0.0/8
        "tpu-tests": (set(), []),
    }


def test_vllm_serves_from_one_tpu_host_behind_a_cluster_ip(release: Release):
    values_file = VALUES / "v6e-8-vllm.yaml"
    release.add_nodes_for(values_file)  # a v6e 2x4 pool beside the CPU pool
    installed = release.install(values_file)  # into a namespace enforcing `restricted`
    ns = release.namespace
    (deployment,) = pykube.Deployment.objects(release.api).filter(namespace=ns)
    wait_for_deployments_to_run(release.api, [deployment.name], ns, timeout_sec=60)
    (pod,) = release.pods(**{"app.kubernetes.io/component": "vllm"})
    labels = node_labels(release, pod)
    shape = tpu_type("v6e-8")
    assert labels[GKE_TOPOLOGY_LABEL] == shape.topology
    assert labels[GKE_ACCELERATOR_LABEL] == shape.generation.gke_accelerator
    (container,) = pod.obj["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    service = pykube.Service.objects(release.api).filter(namespace=ns).get(name=deployment.name)
    assert service.obj["spec"]["type"] == "ClusterIP"
    assert service.obj["spec"]["ports"][0]["port"] == 8000
    # The install's notes say how to reach it without exposing it.
    assert f"port-forward service/{deployment.name} 8000:8000" in installed.stdout
    # helm test's pod is admitted and scheduled (under kwok no container runs the check: it
    # is tested against a FAKE vLLM server in tests/unit/test_serving_check.py).
    release.helm("test", release.name, "--timeout", "5s", check=False)
    wait_for(
        "helm test's pod to be scheduled",
        lambda: any(
            p.obj["spec"].get("nodeName")
            for p in release.pods(**{"app.kubernetes.io/component": "test"})
        ),
        60,
        explain=release.events,
    )
    # Only helm test's pod (and the named clients: none here) may reach the serving port.
    tests = {p.name for p in release.pods(**{"app.kubernetes.io/component": "test"})}
    assert policy_selection(release) == {
        deployment.name: ({pod.name}, [tests]),
        f"{release.name}-tests": (tests, []),  # and nothing reaches helm test's pod
    }
    # vLLM's own identity, not training's, and the bucket read-only.
    assert pod.obj["spec"]["serviceAccountName"] == deployment.name


def test_topology_without_nodes_stays_pending_with_the_schedulers_reason(release: Release):
    release.add_nodes_for(VALUES / "v6e-8-single-host.yaml")  # only 2x4 hosts exist
    release.install(VALUES / "v6e-16.yaml")  # wants 4x4 hosts

    def unschedulable():
        workers = release.pods(**WORKER)
        conds = [
            c
            for p in workers
            for c in p.obj["status"].get("conditions", [])
            if c["type"] == "PodScheduled"
        ]
        return (
            len(workers) == 4
            and len(conds) == 4
            and all(c["status"] == "False" and c["reason"] == "Unschedulable" for c in conds)
            and conds
        )

    conds = wait_for(
        "the scheduler to give up on the workers", unschedulable, 60, explain=release.events
    )
    for cond in conds:
        assert "didn't match Pod's node affinity/selector" in cond["message"], cond["message"]
    for pod in release.pods(**WORKER):
        assert pod.obj["status"]["phase"] == "Pending"
    assert not ready(release.raycluster())


def test_upgrade_to_two_slices_then_uninstall_leaves_nothing(release: Release):
    release.add_nodes_for(VALUES / "v6e-16-x2.yaml")
    release.install(VALUES / "v6e-16.yaml")
    wait_ready(release)
    token_before = _token(release)
    release.upgrade(VALUES / "v6e-16-x2.yaml")
    wait_for(
        "8 workers (2 slices x 4 hosts) running",
        lambda: (
            len([p for p in release.pods(**WORKER) if p.obj["status"].get("phase") == "Running"])
            == 8
        ),
        60,
        explain=release.events,
    )
    wait_ready(release)
    # The upgrade rendered the chart again (as every GitOps sync does): still KubeRay's one
    # Secret with the same token, and every pod, the first slice's and the new one's, reads it.
    assert _token(release) == token_before, "an upgrade must keep the Ray auth token"
    secret = release.raycluster()["metadata"]["name"]
    for pod in [*release.pods(**WORKER), *release.pods(**HEAD)]:
        (container,) = [c for c in pod.obj["spec"]["containers"] if c["name"].startswith("ray-")]
        refs = [
            e["valueFrom"]["secretKeyRef"]
            for e in container["env"]
            if e["name"] == "RAY_AUTH_TOKEN"
        ]
        assert refs == [{"name": secret, "key": "auth_token"}], (pod.name, refs)

    release.helm("uninstall", release.name, "--wait")
    ns = release.namespace

    def leftovers():
        kinds = [
            pykube.Pod,
            pykube.Service,
            pykube.Secret,
            pykube.ServiceAccount,
            pykube.ConfigMap,
            pykube.Deployment,
            pykube.Job,
        ]
        left = [
            f"{k.kind}/{o.name}"
            for k in kinds
            for o in k.objects(release.api).filter(namespace=ns)
            if not (k is pykube.ConfigMap and o.name == "kube-root-ca.crt")
            and not (k is pykube.ServiceAccount and o.name == "default")
        ]
        left += [
            f"RayCluster/{o.name}"
            for o in ray_clusters(release.api).objects(release.api).filter(namespace=ns)
        ]
        return left

    wait_for(
        "uninstall to remove everything",
        lambda: not leftovers(),
        60,
        explain=lambda: str(leftovers()),
    )


def _token(release: Release) -> str:
    """The token of KubeRay's Secret, the release's only one holding a token."""
    secrets = [
        s
        for s in pykube.Secret.objects(release.api).filter(namespace=release.namespace)
        if "auth_token" in s.obj.get("data", {})
    ]
    assert [s.name for s in secrets] == [release.raycluster()["metadata"]["name"]]
    return secrets[0].obj["data"]["auth_token"]


def _preflight(release: Release, name: str, *job_args: str) -> subprocess.CompletedProcess:
    """`tpu-launcher preflight --release NAME` against this cluster (kubectl on PATH)."""
    return subprocess.run(
        [sys.executable, "-m", "launcher", "preflight", "--release", name,
         "--namespace", release.namespace, "--", *job_args],
        cwd=REPO, env=release.kubectl_env(), capture_output=True, text=True,
    )  # fmt: skip


def test_preflight_reads_the_slice_from_a_release(release: Release):
    """`tpu-launcher preflight --release`: the target slice comes from the release's RayCluster (the
    parallelism check runs before any compile, so a mismatch shows what was read)."""
    release.add_nodes_for(VALUES / "v6e-16-x2.yaml")
    release.install(VALUES / "v6e-16-x2.yaml")
    job = ["base.yml", "run_name=r", "ici_fsdp_parallelism=8", "dcn_data_parallelism=2"]
    proc = _preflight(release, release.name, *job)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "does not match the 16 devices per slice (2 x v6e-16 (TPU v6e 4x4" in proc.stderr

    missing = _preflight(release, "nope", "base.yml", "run_name=r")
    assert missing.returncode == 2
    assert "no RayCluster of release 'nope'" in missing.stderr


def test_preflight_lets_a_cpu_release_through(release: Release):
    """`submit --release` runs preflight first; a release without TPUs has nothing to
    compile and must not stop the submission."""
    release.add_nodes_for(VALUES / "cpu.yaml")
    release.install(VALUES / "cpu.yaml")
    proc = _preflight(release, release.name, "tiny-llama.yml", "run_name=r")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no TPU worker group: nothing to compile" in proc.stdout


def test_the_release_namespaces_enforce_restricted(release: Release):
    """The admission the tests above rely on is live: a pod `restricted` forbids is refused."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "root-pod", "namespace": release.namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},  # root, no seccomp
    }
    with pytest.raises(pykube.exceptions.HTTPError, match="violates PodSecurity"):
        pykube.Pod(release.api, pod).create()
