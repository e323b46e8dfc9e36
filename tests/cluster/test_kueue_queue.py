"""Kueue admits the release's RayJobs whole, against the real Kueue controller (its KubeRay
RayJob integration) beside the real KubeRay operator in the test control plane. The queue is what
`tpu-launcher gke queue` prints for a v6e-16 release, with quota for one slice: one job runs (its
cluster's pods all created on the fake TPU nodes) while the next waits suspended; the first one
going admits the second; a higher priority preempts a lower one, which resumes after it."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import pykube
import pytest
import yaml

from ci.cluster import gke_nodes
from harness.helm import CHART, helm
from harness.kube import Release, dump, wait_for
from harness.local_ray import tpu_launcher
from harness.paths import REPO
from launcher.core.tpu.capacity import QUEUED_FLEX_START
from launcher.core.tpu.table import GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL
from tests.support import fake_gcloud

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

V6E_16 = REPO / "values" / "v6e-16.yaml"
WORKER = {"ray.io/node-type": "worker"}
TPU = "google.com/tpu"
ADMIT_S = 90  # Kueue's admission, KubeRay's cluster, kwok's pods: seconds on an idle machine


def rayjob(release: Release) -> dict:
    jobs = pykube.object_factory(release.api, "ray.io/v1", "RayJob")
    return (
        jobs.objects(release.api)
        .filter(namespace=release.namespace)
        .get(name=f"{release.name}-ray")
        .obj
    )


def running_workers(release: Release) -> int:
    pods = release.pods(**WORKER, **{"app.kubernetes.io/instance": release.name})
    return sum(p.obj["status"].get("phase") == "Running" for p in pods)


def admitted(release: Release) -> bool:
    """Unsuspended by Kueue, and the whole slice's hosts running: 4 of a v6e-16."""
    return not rayjob(release)["spec"].get("suspend") and running_workers(release) == 4


def waiting(release: Release) -> bool:
    return bool(rayjob(release)["spec"].get("suspend")) and running_workers(release) == 0


def workload_of(release: Release) -> dict | None:
    """Kueue's Workload for the release's RayJob (None: none yet)."""
    workloads = pykube.object_factory(release.api, "kueue.x-k8s.io/v1beta2", "Workload")
    for w in workloads.objects(release.api).filter(namespace=release.namespace):
        if any(
            o["name"] == f"{release.name}-ray" for o in w.obj["metadata"].get("ownerReferences", [])
        ):
            return w.obj
    return None


def workload_conditions(release: Release) -> dict[str, str]:
    """Kueue's Workload for the release's RayJob: its conditions, type -> reason."""
    w = workload_of(release) or {}
    return {c["type"]: c.get("reason", "") for c in w.get("status", {}).get("conditions", [])}


def install_job(
    release: Release, queue: str, priority: str, *values: Path, verb: str = "install"
) -> subprocess.CompletedProcess:
    return release.helm(
        verb,
        release.name,
        str(CHART),
        *release.values_args(V6E_16, *values),
        "--set",
        "ray.job.enabled=true",
        "--set",
        f"ray.job.args={{base.yml,run_name={release.name}}}",
        "--set",
        f"kueue.queueName={queue}",
        *(("--set", f"kueue.priorityClass={priority}") if priority else ()),
    )


def launcher(release: Release, *args: str) -> subprocess.CompletedProcess:
    """`tpu-launcher` against the test cluster, with its kubectl on PATH."""
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args],
        text=True,
        capture_output=True,
        env=release.kubectl_env(),
        cwd=REPO,
    )


def kubectl_apply(release: Release, manifest: str) -> None:
    done = subprocess.run(
        [*release.kubectl(), "apply", "-f", "-"], input=manifest, text=True, capture_output=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def queue_for(release: Release, queue: str, *values: Path) -> str:
    """What `tpu-launcher gke queue` prints for the release's values: quota for one slice."""
    printed = subprocess.run(
        [
            *(sys.executable, "-m", "launcher", "gke", "queue"),
            *(a for v in (V6E_16, *values) for a in ("--values", str(v))),
            *("--chart", str(CHART), "--helm", str(helm(3)), "--bucket", "my-bucket"),
            *("--queue", queue, "--namespace", release.namespace, "--quota-slices", "1"),
        ],
        text=True,
        capture_output=True,
        cwd=REPO,
    )
    assert printed.returncode == 0, printed.stdout + printed.stderr
    return printed.stdout


def test_kueue_admits_rayjobs_whole_in_turn_and_by_priority(release: Release):
    suffix = release.namespace.rsplit("-", 1)[1]
    queue, low, high = f"team-{suffix}", f"low-{suffix}", f"high-{suffix}"
    release.add_nodes_for(V6E_16)
    printed = queue_for(release, queue)
    priorities = "\n---\n".join(
        f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\n"
        f"metadata: {{name: {name}}}\nvalue: {value}\n"
        for name, value in ((low, 100), (high, 1000))
    )
    kubectl_apply(release, printed + "\n---\n" + priorities)
    first = release
    second = Release(release.api, release.kubeconfig, release.namespace, name="job-b")
    urgent = Release(release.api, release.kubeconfig, release.namespace, name="job-c")
    explain = lambda: dump([rayjob(r) for r in (first, second)]) + release.events()  # noqa: E731

    install_job(first, queue, low)
    wait_for("the first job admitted whole", lambda: admitted(first), ADMIT_S, explain)
    install_job(second, queue, low)
    # The quota holds one slice: the second waits, suspended, none of its pods created.
    wait_for("the second job queued", lambda: rayjob(second)["spec"].get("suspend"), 30, explain)
    time.sleep(10)  # Kueue had its chance to (wrongly) admit it
    assert waiting(second), explain()
    # Kueue's own verdict: no quota reserved for it yet.
    assert workload_conditions(second) == {"QuotaReserved": "Pending"}, explain()
    # What the user sees of it; a submit to a RayJob release is refused, not sent to its cluster.
    where = ("--release", second.name, "--namespace", release.namespace)
    status = launcher(release, "status", *where)
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"suspended, waiting for Kueue's queue {queue} to admit it whole" in status.stdout
    submit = launcher(release, "submit", *where, "--", "base.yml", "steps=1")
    assert submit.returncode == 2 and "is a RayJob" in submit.stderr, submit.stderr

    first.helm("uninstall", first.name, "--wait")
    wait_for("the second job admitted", lambda: admitted(second), ADMIT_S, explain)

    # A higher priority takes the slice; the lower job is suspended again, its cluster gone.
    install_job(urgent, queue, high)
    wait_for("the urgent job admitted", lambda: admitted(urgent), ADMIT_S, explain)
    wait_for("the low job preempted", lambda: waiting(second), ADMIT_S, explain)
    assert workload_conditions(second)["Evicted"] == "Preempted", explain()
    urgent.helm("uninstall", urgent.name, "--wait")
    wait_for("the low job resumed", lambda: admitted(second), ADMIT_S, explain)
    second.helm("uninstall", second.name, "--wait")
    for kind, names in (
        ("clusterqueue", [f"{queue}-tpu"]),
        ("workloadpriorityclass", [low, high]),
    ):
        subprocess.run([*release.kubectl(), "delete", kind, *names], capture_output=True)


def provisioning_requests(release: Release) -> list[dict]:
    kind = pykube.object_factory(release.api, "autoscaling.x-k8s.io/v1", "ProvisioningRequest")
    return [r.obj for r in kind.objects(release.api).filter(namespace=release.namespace)]


def fake_gke_provisions(release: Release, state: dict, request: dict) -> list[str]:
    """FAKE of GKE's queued provisioning (its ProvisioningRequest controller cannot run here):
    GKE makes the request's nodes, all at once, in a node pool the FAKE gcloud's project has
    with queued provisioning (fake_gcloud.queued_pool_for), labelled and tainted
    cloud.google.com/gke-queued, then marks the request provisioned. Without such a pool it
    does nothing, as GKE leaves such a request waiting. Returns the nodes it made."""
    (pod_set,) = request["spec"]["podSets"]
    templates = pykube.object_factory(release.api, "v1", "PodTemplate")
    template = (
        templates.objects(release.api)
        .filter(namespace=release.namespace)
        .get(name=pod_set["podTemplateRef"]["name"])
    )
    spec = template.obj["template"]["spec"]
    selector = spec.get("nodeSelector", {})
    pool = fake_gcloud.queued_pool_for(state, selector, pod_set["count"])
    if pool is None:
        return []
    labels = {k: selector[k] for k in (GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL)}
    labels.update(QUEUED_FLEX_START.node_labels)
    chips = int(spec["containers"][0]["resources"]["limits"][TPU])
    made = [f"{request['metadata']['name'][:40]}-{i}" for i in range(pod_set["count"])]
    for name in made:
        node = gke_nodes.node(
            name, pool["name"], pool["machineType"], labels, chips, QUEUED_FLEX_START.taints
        )
        pykube.Node(release.api, node).create()
        release.nodes.append(name)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {"type": t, "status": "True", "reason": t, "message": "fake GKE", "lastTransitionTime": now}
        for t in ("Accepted", "Provisioned")
    ]
    done = subprocess.run(
        [
            *release.kubectl(),
            *("-n", release.namespace, "patch", "provisioningrequest"),
            request["metadata"]["name"],
            *("--subresource=status", "--type=merge"),
            *("-p", json.dumps({"status": {"conditions": conditions}})),
        ],
        text=True,
        capture_output=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return made


def pending_workers(release: Release, name: str) -> list[dict]:
    pods = release.pods(**WORKER, **{"app.kubernetes.io/instance": name})
    return [p.obj for p in pods if p.obj["status"].get("phase") == "Pending"]


def test_flex_start_admits_the_job_once_gke_provisions_its_slice(
    release: Release, gke: dict, tmp_path
):
    """On flex-start the queue's admission check asks GKE for the slice's nodes, all at once:
    Kueue sends one ProvisioningRequest whose one pod set is the TPU hosts (GKE's queued
    provisioning accepts one; the head and the submitter stay out of it), and admits the job
    when GKE has provisioned them. It does so here only because what we made is right: the
    node pool `gke up` made has queued provisioning (without it the request waits for ever),
    and the workers select and tolerate the gke-queued nodes (without the toleration they stay
    Pending on them)."""
    queue = f"flex-{release.namespace.rsplit('-', 1)[1]}"
    flex = tmp_path / "flex-start.yaml"
    flex.write_text(
        f"ray:\n  worker:\n    tpu:\n      capacity: flex-start\nkueue:\n  queueName: {queue}\n"
    )
    # The user's `gke up`, against the FAKE gcloud: the pools GKE may provision in.
    where = ["--release", release.name, "--namespace", release.namespace]
    up = tpu_launcher(
        "gke", "up", "--values", str(V6E_16), "--values", str(flex), *where,
        "--chart", str(CHART), env=gke, timeout=300,
    )  # fmt: skip
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.loads((tmp_path / "gke-state.json").read_text())
    # GKE's CPU pool's nodes (the head, the submitter); the TPU hosts come when provisioned.
    suffix = "-" + release.namespace.rsplit("-", 1)[1]
    for node in gke_nodes.nodes_for(gke_nodes.merged_values(V6E_16, flex), suffix):
        if TPU not in node["status"]["capacity"]:
            pykube.Node(release.api, node).create()
            release.nodes.append(node["metadata"]["name"])
    kubectl_apply(release, queue_for(release, queue, flex))
    install_job(release, queue, "", flex)
    jobs = pykube.object_factory(release.api, "ray.io/v1", "RayJob")

    def explain() -> str:
        found = [j.obj for j in jobs.objects(release.api).filter(namespace=release.namespace)]
        return dump([found, provisioning_requests(release)]) + release.events()

    (request,) = wait_for(
        "Kueue's ProvisioningRequest", lambda: provisioning_requests(release), ADMIT_S, explain
    )
    assert request["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    (pod_set,) = request["spec"]["podSets"]
    assert pod_set["count"] == 4, request  # the v6e-16's hosts

    # A pool made without --enable-queued-provisioning: GKE never provisions; the job waits.
    cluster = f"{fake_gcloud.PROJECT}/{fake_gcloud.LOCATION}/{fake_gcloud.CLUSTER}"
    pools = state["clusters"][cluster]["nodePools"].values()
    (pool,) = [p for p in pools if p["machineType"] == "ct6e-standard-4t"]
    assert pool["queuedProvisioning"]["enabled"] and pool["config"]["flexStart"], pool
    pool["queuedProvisioning"]["enabled"] = False
    assert not fake_gke_provisions(release, state, request)
    time.sleep(5)
    assert waiting(release), explain()  # not provisioned: no pod, still suspended
    pool["queuedProvisioning"]["enabled"] = True  # the pool as gke up made it
    made = fake_gke_provisions(release, state, request)
    assert len(made) == 4
    wait_for("the job admitted once provisioned", lambda: admitted(release), ADMIT_S, explain)
    release.helm("uninstall", release.name, "--wait")
    for name in made:  # the workload gone, GKE removes its nodes
        pykube.Node.objects(release.api).get(name=name).delete()
        release.nodes.remove(name)

    # The same job with no toleration of the gke-queued taint, neither on its workers (the
    # chart's) nor from the queue's flavor (Kueue adds a flavor's to the pods it admits):
    # provisioned and admitted, the workers stay Pending on the nodes GKE made for them.
    queue_objects = list(yaml.safe_load_all(queue_for(release, queue, flex)))
    for flavor in queue_objects:
        if flavor["kind"] == "ResourceFlavor":
            flavor.get("spec", {}).pop("tolerations", None)
    kubectl_apply(release, yaml.safe_dump_all(queue_objects))
    second = Release(release.api, release.kubeconfig, release.namespace, name="job-b")
    rendered = install_job(second, queue, "", flex, verb="template").stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = release.namespace  # helm template leaves it out
        if doc["kind"] == "RayJob":
            spec = doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
            spec["tolerations"] = [t for t in spec["tolerations"] if "gke-queued" not in t["key"]]
    kubectl_apply(release, yaml.safe_dump_all(docs))
    (request,) = wait_for(
        "the second job's ProvisioningRequest",
        lambda: [r for r in provisioning_requests(release) if second.name in r["metadata"]["name"]],
        ADMIT_S,
        explain,
    )
    assert len(fake_gke_provisions(release, state, request)) == 4
    wait_for(
        "the second job's workers created",
        lambda: len(pending_workers(release, second.name)) == 4,
        ADMIT_S,
        explain,
    )
    time.sleep(5)
    assert len(pending_workers(release, second.name)) == 4, explain()
    # The four nodes GKE made are the only ones with the slice's labels: their taint stops them
    # (the workers tolerate google.com/tpu, as the first job's ran).
    assert "4 node(s) had untolerated taint(s)" in release.events(), release.events()
    delete = [*release.kubectl(), "-n", release.namespace, "delete", "rayjob", f"{second.name}-ray"]
    subprocess.run(delete, capture_output=True)
    subprocess.run(
        [*release.kubectl(), "delete", "clusterqueue", f"{queue}-tpu"], capture_output=True
    )


def flavor_of(release: Release) -> str | None:
    """The flavor Kueue admitted the release's RayJob's TPU hosts on (None: not admitted)."""
    admission = ((workload_of(release) or {}).get("status") or {}).get("admission") or {}
    for pod_set in admission.get("podSetAssignments", []):
        if TPU in pod_set.get("flavors", {}):
            return pod_set["flavors"][TPU]
    return None


def worker_nodes(release: Release) -> set[str]:
    pods = release.pods(**WORKER, **{"app.kubernetes.io/instance": release.name})
    return {p.obj["spec"].get("nodeName", "") for p in pods}


def host_capacity(release: Release, job: Release, tmp_path) -> tuple[str, bool] | None:
    """launcher.runtime.cluster.node_capacity.capacity_here for one of `job`'s TPU hosts, with the
    pod's env (TPU_CAPACITY, NODE_NAME, the API server's address) and its account's token."""
    from urllib.parse import urlparse

    from launcher.runtime.cluster.node_capacity import capacity_here

    (pod, *_) = release.pods(**WORKER, **{"app.kubernetes.io/instance": job.name})
    spec = pod.obj["spec"]
    env = {e["name"]: e.get("value", "") for e in spec["containers"][0]["env"]}
    env["NODE_NAME"] = spec["nodeName"]
    config = yaml.safe_load(Path(release.kubeconfig).read_text())
    (cluster,) = config["clusters"]
    server = urlparse(cluster["cluster"]["server"])
    env |= {"KUBERNETES_SERVICE_HOST": server.hostname, "KUBERNETES_SERVICE_PORT": str(server.port)}
    account = tmp_path / "account"
    account.mkdir()
    token = subprocess.run(
        [
            *release.kubectl(),
            "-n",
            release.namespace,
            "create",
            "token",
            spec["serviceAccountName"],
        ],
        text=True,
        capture_output=True,
    )
    assert token.returncode == 0, token.stderr
    (account / "token").write_text(token.stdout.strip())
    ca = cluster["cluster"].get("certificate-authority-data")
    if ca:
        (account / "ca.crt").write_bytes(base64.b64decode(ca))
    elif path := cluster["cluster"].get("certificate-authority"):
        (account / "ca.crt").write_bytes(Path(path).read_bytes())
    item = capacity_here(env, account)
    return (item.word, item.preemptible) if item else None


def test_a_capacity_fallback_takes_the_first_flavor_with_quota_and_returns_to_it(
    release: Release, tmp_path
):
    """`capacity: [reservation:NAME, on-demand, spot]` under a queue: what `gke queue` prints
    for it (a flavor per item, in order, quota for one slice each) in the real Kueue, with kwok
    TPU nodes labelled as GKE labels each capacity's. The first job gets the reservation; the
    next, with the reservation's quota taken, on-demand (its hosts on the on-demand nodes, as
    Kueue adds the flavor's labels to its pods); the first gone, the next job gets the
    reservation again. `status --release` names each one's flavor and what was passed over."""
    suffix = release.namespace.rsplit("-", 1)[1]
    queue = f"fb-{suffix}"
    fallback = tmp_path / "fallback.yaml"
    fallback.write_text(
        "ray:\n  worker:\n    tpu:\n      capacity: [reservation:res-a, on-demand, spot]\n"
        f"kueue:\n  queueName: {queue}\n"
    )
    nodes = release.add_nodes_for(V6E_16, fallback)
    by_pool: dict[str, set[str]] = {}
    for node in nodes:
        pool = node["metadata"]["labels"].get("cloud.google.com/gke-nodepool", "")
        by_pool.setdefault(pool, set()).add(node["metadata"]["name"])
    # GKE's labels on each item's nodes: a reservation's name, Spot's label and taint.
    labelled = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes}
    assert (
        sum(v.get("cloud.google.com/reservation-name") == "res-a" for v in labelled.values()) == 4
    )
    assert sum(v.get("cloud.google.com/gke-spot") == "true" for v in labelled.values()) == 4
    printed = queue_for(release, queue, fallback)
    kubectl_apply(release, printed)
    flavors = [f"tpu-v6e-4x4-{w}" for w in ("reservation-res-a", "on-demand", "spot")]
    first = Release(release.api, release.kubeconfig, release.namespace, name="fb-a")
    second = Release(release.api, release.kubeconfig, release.namespace, name="fb-b")
    third = Release(release.api, release.kubeconfig, release.namespace, name="fb-c")

    jobs = pykube.object_factory(release.api, "ray.io/v1", "RayJob")

    def explain() -> str:
        found = [j.obj for j in jobs.objects(release.api).filter(namespace=release.namespace)]
        return dump(found) + release.events()

    def on(job: Release, flavor: str) -> None:
        wait_for(f"{job.name} admitted whole", lambda: admitted(job), ADMIT_S, explain)
        assert flavor_of(job) == flavor, explain()
        pools = {p for p, names in by_pool.items() if worker_nodes(job) & names}
        assert len(pools) == 1 and flavor.rsplit("-4x4-", 1)[1] in next(iter(pools)), pools

    install_job(first, queue, "", fallback)
    on(first, flavors[0])
    install_job(second, queue, "", fallback)
    on(second, flavors[1])
    where = ("--release", second.name, "--namespace", release.namespace)
    status = launcher(release, "status", *where)
    said = f"on flavor {flavors[1]} (choice 2 of 3: {', '.join(flavors)})"
    assert said in status.stdout, status.stdout + status.stderr
    assert f"passed over, their quota taken: {flavors[0]}: 16 of 16 chips in use" in status.stdout
    # KubeRay names the job it would submit; kwok's pods run no Ray to ask about it.
    assert "no Ray dashboard answers" in status.stderr, status.stderr
    # What a host of the second job learns it got, as it would in its pod: its own node's
    # labels, read from this API server with a token of the workers' account (the chart's
    # ClusterRole: get nodes), over the cluster's TLS.
    assert host_capacity(release, second, tmp_path) == ("on-demand", False)

    first.helm("uninstall", first.name, "--wait")
    queues = pykube.object_factory(release.api, "kueue.x-k8s.io/v1beta2", "ClusterQueue")

    def reservation_free() -> bool:
        status = queues.objects(release.api).get(name=f"{queue}-tpu").obj.get("status", {})
        used = {
            f["name"]: sum(int(r["total"]) for r in f["resources"] if r["name"] == TPU)
            for f in status.get("flavorsReservation", [])
        }
        return used.get(flavors[0], 0) == 0

    # Kueue gives the quota back when it sees the workload go, a moment after Helm's uninstall.
    wait_for("the reservation's quota given back", reservation_free, ADMIT_S, explain)
    install_job(third, queue, "", fallback)
    on(third, flavors[0])  # the reservation first again
    for job in (second, third):
        job.helm("uninstall", job.name, "--wait")
    subprocess.run(
        [*release.kubectl(), "delete", "clusterqueue", f"{queue}-tpu"], capture_output=True
    )
