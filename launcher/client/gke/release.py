"""What a release asks GKE for, read from the chart's own rendering (`helm template`): the node
pools its pods select, the CPU its other pods request, the launcher image they pull, the bucket
they mount and the identity each part runs as. Nothing here is decided twice: the plan, the
image build and the install all render the chart with the same target values."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from launcher.client.commands import run
from launcher.client.gke.target import GkeTarget
from launcher.client.jobs.release_data import GCSFUSE_DRIVER
from launcher.core.errors import CommandError, UsageError
from launcher.core.quantities import quantity
from launcher.core.tpu.capacity import (
    CAPACITIES,
    COMPUTE_CLASS_LABEL,
    FLEX_START,
    ON_DEMAND,
    RESERVATION,
    SPOT,
    Capacity,
    CapacityItem,
    capacity_from_selector,
    items_of_pod,
)
from launcher.core.tpu.machines import MACHINES, node_vcpus
from launcher.core.tpu.preemption import pod_grace_seconds
from launcher.core.tpu.slices import TpuSlices, from_pod_spec, worker_group_slices
from launcher.core.values_file import load_values

# The target's placeholders that reach the chart's values (the image's registry and repository,
# the bucket): a plan for a target not yet named renders with names the schema accepts in their
# place, and shows them as ${VARS}.
_STAND_INS = {
    v: f"{v[2:-1].lower().replace('_', '-')}-placeholder"
    for v in ("${REGION}", "${PROJECT_ID}", "${BUCKET}")
}

# The CPU pool's machine series, smallest first (n2-standard-N: N vCPU, 4N GiB).
CPU_MACHINES = ("n2-standard-4", "n2-standard-8", "n2-standard-16", "n2-standard-32")
# Per node, what GKE's own DaemonSets (kube-proxy, fluentbit, gke-metadata-server, the gcsfuse
# and Ray add-ons' node agents) take before our pods; per pod, the gcsfuse sidecar's requests
# (GKE's defaults: 250m CPU, 256 MiB).
NODE_SYSTEM = (0.5, 1.0)
GCSFUSE_SIDECAR = (0.25, 0.25)


@dataclass(frozen=True)
class NodePool:
    name: str
    slices: TpuSlices
    capacity: Capacity = CAPACITIES[ON_DEMAND]  # as the pods' node selector asks
    reservation: str | None = None
    # Its pods exist only while a job runs (a RayJob's cluster, slices given back when idle):
    # the pool scales from zero.
    while_job_runs: bool = False
    grace_seconds: int | None = None  # what its pods have to save on a notice (None: no notice)

    # A capacity fallback: the class its nodes join (GKE's ComputeClass walks the list; None:
    # Kueue's flavors do), and the group's items in order, this pool's among them.
    compute_class: str | None = None
    fallback: tuple[CapacityItem, ...] = ()

    @classmethod
    def of(
        cls, name: str, slices: TpuSlices, pod: dict, while_job_runs: bool = False
    ) -> list[NodePool]:
        """The pools a group of slices needs: one, or with a capacity fallback one per item
        (each scales from zero: only the one GKE or Kueue picks holds nodes)."""
        grace = pod_grace_seconds(pod)
        items = items_of_pod(pod)
        if len(items) < 2:
            capacity, reservation = capacity_from_selector(pod.get("nodeSelector") or {})
            return [cls(name, slices, capacity, reservation, while_job_runs, grace)]
        compute_class = (pod.get("nodeSelector") or {}).get(COMPUTE_CLASS_LABEL)
        reservations = [i for i in items if i.capacity.name == RESERVATION]
        return [
            cls(
                f"{name}-{_item_suffix(item, reservations)}",
                slices,
                item.capacity,
                item.reservation,
                True,
                grace,
                compute_class,
                tuple(items),
            )
            for item in items
        ]

    @property
    def autoscaled(self) -> bool:
        """Nodes only while pods ask for them: a RayJob's pool, and every flex-start pool."""
        return self.while_job_runs or self.capacity.name == FLEX_START


def _item_suffix(item: CapacityItem, reservations: list[CapacityItem]) -> str:
    """A fallback pool's name after its group's: short, as GKE allows 40 characters."""
    if item.capacity.name == RESERVATION:
        return f"res{reservations.index(item)}" if len(reservations) > 1 else "res"
    return {ON_DEMAND: "od", SPOT: "spot", FLEX_START: "flex"}[item.capacity.name]


@dataclass(frozen=True)
class CpuPool:
    name: str
    machine: str
    nodes: int
    pods: int  # the pods it was sized for


@dataclass(frozen=True)
class Identity:
    """A Kubernetes service account the release's pods run as, the Google service account it
    acts as (None: Workload Identity grants go to the Kubernetes account itself), and whether
    any of its pods writes the bucket (training's mount, Saxml through GCS's API) or all only
    read it (vLLM's read-only mount)."""

    account: str
    gcp_service_account: str | None
    writes: bool
    # Where an account that only reads the bucket still writes (vLLM's compile cache): prefixes.
    write_prefixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReleaseNeeds:
    """What the rendered release asks GKE for."""

    pools: list[NodePool]
    cpu_pods: list[tuple[float, float]]  # (CPU, GiB) each pod without TPUs requests
    namespace: str
    identities: list[Identity]  # those whose pods use the bucket
    ray: bool
    jobset: bool
    launcher_image: str | None  # what the Ray pods pull (None: no Ray in this release)
    bucket: str | None  # what the pods mount (None: gcsfuse off)
    network_policies: bool = False  # it has NetworkPolicies (networkPolicy.enabled)
    leader_worker_set: bool = False  # vLLM as a LeaderWorkerSet: LWS must run in the cluster


def render(
    chart: Path,
    values: list[str],
    release: str,
    namespace: str,
    target: GkeTarget,
    helm: str,
    extra_sets: Sequence[str] = (),
) -> tuple[list[dict], str | None]:
    """The release's objects as Helm renders them for `target` (and `extra_sets`, `--set`
    values after the target's, as `install` passes them), and the bucket they mount (None:
    gcsfuse off)."""
    if not (chart / "Chart.yaml").is_file():
        raise UsageError("--chart", f"no chart at {chart}", "run from the checkout or pass --chart")
    merged = load_values(chart / "values.yaml", *values)
    gcsfuse = merged.get("global", {}).get("gcsfuse", {})
    bucket = target.bucket or gcsfuse.get("bucketName") or "${BUCKET}"
    sets = [v for v in target.helm_sets() if not v.startswith("global.gcsfuse.bucketName=")]
    sets += [f"global.gcsfuse.bucketName={bucket}", *extra_sets]
    argv = [helm, "template", release, str(chart), "--namespace", namespace]
    for path in values:
        argv += ["-f", path]
    for value in sets:
        for variable, stand_in in _STAND_INS.items():
            value = value.replace(variable, stand_in)
        argv += ["--set", value]
    proc = run("render the release", argv, capture=True, check=False)
    if proc.returncode:
        if refused := chart_refusals(proc.stderr):
            raise UsageError(
                "values",
                "the chart refuses them:\n" + "\n".join(f"  - {r}" for r in refused),
                f"change what is named (every value: {chart / 'README.md'})",
            )
        raise CommandError("render the release", argv, proc.returncode, proc.stderr)
    rendered = proc.stdout
    for variable, stand_in in _STAND_INS.items():
        rendered = rendered.replace(stand_in, variable)
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    return docs, bucket if gcsfuse.get("enabled", True) else None


# How Helm reports the chart's refusals (templates/validate.yaml) and its schema's.
_CHART_REFUSED = "VALUES REFUSED by the tpu-stack chart:"
_SCHEMA_REFUSED = "values don't meet the specifications of the schema"


def chart_refusals(stderr: str) -> list[str]:
    """The user's mistakes Helm printed (the chart's own, then its schema's), one a line;
    [] for any other failure (no helm, a broken chart)."""
    lines = stderr.splitlines()
    if any(_CHART_REFUSED in line for line in lines):
        return [x.strip()[2:] for x in lines if x.strip().startswith("- ")]
    if any(_SCHEMA_REFUSED in line for line in lines):
        return [x[2:] for x in lines if x.startswith("- at ")]
    return []


def pod_requests(pod: dict) -> tuple[float, float]:
    """(CPU, GiB) a pod's containers request (the larger of requests and limits where only a
    limit is given, as Kubernetes defaults a request to its limit)."""
    cpu = mem = 0.0
    for container in pod.get("containers", []):
        res = container.get("resources", {})
        req, lim = res.get("requests", {}), res.get("limits", {})
        cpu += quantity(req.get("cpu", lim.get("cpu")), memory=False)
        mem += quantity(req.get("memory", lim.get("memory")), memory=True)
    return cpu, mem


def _only_dir(volume: dict) -> str | None:
    """The one directory of the bucket a gcsfuse volume mounts (its only-dir option), or None."""
    options = volume["csi"].get("volumeAttributes", {}).get("mountOptions", "")
    for option in str(options).split(","):
        key, _, value = option.partition("=")
        if key.strip() == "only-dir" and value.strip():
            return value.strip().strip("/")
    return None


def _bucket_use(pod: dict, bucket: str | None) -> tuple[str, frozenset[str]] | None:
    """ "rw" or "ro" where a pod uses the bucket, with the prefixes a read-only pod still
    writes; None where it uses none. A gcsfuse volume is read-only when the volume or every
    container's mount of it says so; a read-write one that mounts one directory (only-dir:
    vLLM's compile cache) writes under that directory's parent only. A pod that mounts none
    but names the bucket in its args or env (Saxml's GSBUCKET and SAX_ROOT: its servers keep
    their state there through GCS's API) writes it."""
    volumes = [
        v for v in pod.get("volumes", []) if v.get("csi", {}).get("driver") == GCSFUSE_DRIVER
    ]
    if not volumes:
        said = [
            str(word)
            for c in pod.get("containers", [])
            for word in [*c.get("args", []), *(e.get("value", "") for e in c.get("env", []))]
        ]
        named = bucket and any(w == bucket or f"gs://{bucket}/" in w for w in said)
        return ("rw", frozenset()) if named else None
    mounts = [m for c in pod.get("containers", []) for m in c.get("volumeMounts", [])]

    def read_only(volume: dict) -> bool:
        of_it = [m for m in mounts if m["name"] == volume["name"]]
        return bool(volume["csi"].get("readOnly")) or (
            bool(of_it) and all(m.get("readOnly") for m in of_it)
        )

    writing = [v for v in volumes if not read_only(v)]
    dirs = [_only_dir(v) for v in writing]
    if not writing:
        return "ro", frozenset()
    if all(dirs):
        return "ro", frozenset(f"{d.rpartition('/')[0] or d}/" for d in dirs if d)
    return "rw", frozenset()


def _pod_templates(doc: dict) -> list[tuple[dict, int]]:
    """(pod template: metadata and spec, pods) of every pod template in one rendered object."""
    kind, spec = doc.get("kind"), doc.get("spec", {})
    if kind == "RayJob":  # the cluster it creates while it runs, and its submitter
        submitter = [(spec["submitterPodTemplate"], 1)] if "submitterPodTemplate" in spec else []
        return submitter + _pod_templates({"kind": "RayCluster", "spec": spec["rayClusterSpec"]})
    if kind == "RayService":  # vLLM on Ray Serve LLM: its cluster
        return _pod_templates({"kind": "RayCluster", "spec": spec["rayClusterConfig"]})
    if kind == "LeaderWorkerSet":  # per replica a leader and size - 1 workers
        group = spec["leaderWorkerTemplate"]
        replicas, size = spec.get("replicas", 1), group.get("size", 1)
        leader = group.get("leaderTemplate", group["workerTemplate"])
        return [(leader, replicas), (group["workerTemplate"], replicas * (size - 1))]
    if kind == "RayCluster":
        found = [(spec["headGroupSpec"]["template"], 1)]
        for group in spec.get("workerGroupSpecs", []):
            pods = group.get("replicas", 1) * group.get("numOfHosts", 1)
            found.append((group["template"], pods))
        return found
    if kind == "JobSet":
        found = []
        for rj in spec["replicatedJobs"]:
            job = rj["template"]["spec"]
            found.append((job["template"], rj.get("replicas", 1) * job.get("parallelism", 1)))
        return found
    if kind in ("Deployment", "StatefulSet"):
        return [(spec["template"], spec.get("replicas", 1))]
    if kind == "Pod":
        return [(doc, 1)]
    return []


def needs(docs: list[dict], namespace: str, release: str, bucket: str | None) -> ReleaseNeeds:
    """What the rendered objects ask GKE for: a node pool per TPU worker group (RayCluster,
    vLLM's RayService), per replicated Job (Saxml's JobSet) and per TPU Deployment or
    LeaderWorkerSet (vLLM), CPU for the rest, the account the pods run as, the add-ons."""
    pools: list[NodePool] = []
    cpu_pods: list[tuple[float, float]] = []
    test_pods: list[tuple[float, float]] = []  # helm test's, minutes long
    gsas: dict[str, str] = {}  # Kubernetes account -> its Workload Identity annotation
    writers: dict[str, bool] = {}  # account of pods that use the bucket -> any writes it
    prefixes: dict[str, frozenset[str]] = {}  # account -> where a read-only one still writes
    image = None
    ray = jobset = leader_worker_set = False
    for doc in docs:
        kind = doc.get("kind")
        hook = "helm.sh/hook" in doc["metadata"].get("annotations", {})
        for template, count in _pod_templates(doc):
            # Every pod the release runs that holds no TPU slice.
            if from_pod_spec(template["spec"], 1) is None:
                cpu, mem = pod_requests(template["spec"])
                annotations = template.get("metadata", {}).get("annotations", {})
                if annotations.get("gke-gcsfuse/volumes") == "true":
                    cpu, mem = cpu + GCSFUSE_SIDECAR[0], mem + GCSFUSE_SIDECAR[1]
                (test_pods if hook else cpu_pods).extend([(cpu, mem)] * count)
            if not hook and (use := _bucket_use(template["spec"], bucket)) is not None:
                account = template["spec"].get("serviceAccountName", "default")
                writers[account] = writers.get(account, False) or use[0] == "rw"
                prefixes[account] = prefixes.get(account, frozenset()) | use[1]
        if hook:
            continue  # helm test's objects are not the release's
        if kind == "ServiceAccount":
            annotations = doc["metadata"].get("annotations", {})
            if gsa := annotations.get("iam.gke.io/gcp-service-account"):
                gsas[doc["metadata"]["name"]] = gsa
        elif kind in ("RayCluster", "RayJob"):
            ray = True
            cluster = doc["spec"] if kind == "RayCluster" else doc["spec"]["rayClusterSpec"]
            head = cluster["headGroupSpec"]["template"]["spec"]
            image = head["containers"][0]["image"]
            # A RayJob's cluster, or a group whose slices jobs ask for (no replicas given:
            # ray.worker.tpu.releaseIdleAfterSeconds), holds nodes only while a job runs.
            asked_for = any("replicas" not in g for g in cluster["workerGroupSpecs"])
            for slices, pod in worker_group_slices(cluster):
                name = f"{release}-ray-{slices.shape.name}"
                pools += NodePool.of(name, slices, pod, kind == "RayJob" or asked_for)
        elif kind == "JobSet":
            jobset = True
            for rj in doc["spec"]["replicatedJobs"]:
                pod = rj["template"]["spec"]["template"]["spec"]
                found = from_pod_spec(pod, rj.get("replicas", 1))
                if found:
                    pools += NodePool.of(f"{release}-sax-{found.shape.name}", found, pod)
        elif kind == "Deployment":  # vLLM: each replica one single-host slice
            pod = doc["spec"]["template"]["spec"]
            found = from_pod_spec(pod, doc["spec"].get("replicas", 1))
            if found:
                pools += NodePool.of(f"{release}-vllm-{found.shape.name}", found, pod)
        elif kind == "RayService":  # vLLM on Ray Serve LLM: a slice per replica
            ray = True
            for slices, pod in worker_group_slices(doc["spec"]["rayClusterConfig"]):
                pools += NodePool.of(f"{release}-vllm-{slices.shape.name}", slices, pod)
        elif kind == "LeaderWorkerSet":  # vLLM: each group (leader and workers) one slice
            leader_worker_set = True
            pod = doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
            found = from_pod_spec(pod, doc["spec"].get("replicas", 1))
            if found:
                pools += NodePool.of(f"{release}-vllm-{found.shape.name}", found, pod)
    # helm test's pod rides in the release's CPU pool; a release with no other pod without TPUs
    # (vLLM) makes no pool for it: it runs for seconds on the cluster's own node.
    return ReleaseNeeds(
        pools,
        cpu_pods + test_pods if cpu_pods else [],
        namespace,
        [
            Identity(a, gsas.get(a), writes, () if writes else tuple(sorted(prefixes[a])))
            for a, writes in sorted(writers.items())
        ],
        ray,
        jobset,
        image,
        bucket,
        any(d.get("kind") == "NetworkPolicy" for d in docs),
        leader_worker_set,
    )


def user_secrets(docs: list[dict]) -> list[tuple[str, str]]:
    """(Secret, key) the release's pods read from Secrets it does not render: the ones its
    user creates, as vLLM's API key (Ray's token Secret is KubeRay's, never in a template)."""
    rendered = {d["metadata"]["name"] for d in docs if d.get("kind") == "Secret"}
    found: list[tuple[str, str]] = []
    for doc in docs:
        if "helm.sh/hook" in doc["metadata"].get("annotations", {}):
            continue
        for template, _ in _pod_templates(doc):
            for container in template["spec"].get("containers", []):
                for env in container.get("env", []):
                    ref = env.get("valueFrom", {}).get("secretKeyRef")
                    if (
                        ref
                        and ref["name"] not in rendered
                        and (ref["name"], ref["key"]) not in found
                    ):
                        found.append((ref["name"], ref["key"]))
    return found


def allocatable(machine: str) -> tuple[float, float]:
    """(CPU, GiB) GKE leaves to pods on a node of `machine`: capacity less what GKE reserves
    for the kubelet and system (GKE's "Standard cluster architecture: node allocatable
    resources": CPU 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% above 4;
    memory 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112,
    2% above 128, plus a 100 MiB eviction threshold)."""
    size = MACHINES[machine]
    cores, gib = float(node_vcpus(machine)), float(size.memory_gib)
    cpu_tiers = ((0, 1, 0.06), (1, 2, 0.01), (2, 4, 0.005), (4, math.inf, 0.0025))
    mem_tiers = ((0, 4, 0.25), (4, 8, 0.20), (8, 16, 0.10), (16, 128, 0.06), (128, math.inf, 0.02))
    cpu_reserved = sum(max(0.0, min(cores, hi) - lo) * share for lo, hi, share in cpu_tiers)
    mem_reserved = sum(max(0.0, min(gib, hi) - lo) * share for lo, hi, share in mem_tiers)
    return cores - cpu_reserved, gib - mem_reserved - 100 / 1024


def room(machine: str) -> tuple[float, float]:
    """What our pods may use on one node of `machine`: allocatable less GKE's DaemonSets."""
    cpu, mem = allocatable(machine)
    return cpu - NODE_SYSTEM[0], mem - NODE_SYSTEM[1]


def cpu_pool(release: str, pods: list[tuple[float, float]]) -> CpuPool | None:
    """The smallest machine of the CPU series that holds the largest pod, and as many nodes of
    it as first-fit-decreasing packing needs for every pod without TPUs."""
    if not pods:
        return None
    for machine in CPU_MACHINES:
        cap_cpu, cap_mem = room(machine)
        if all(c <= cap_cpu and m <= cap_mem for c, m in pods):
            break
    else:
        biggest = max(pods)
        raise UsageError(
            "ray.head.resources",
            f"a pod without TPUs requests {biggest[0]:g} CPU and {biggest[1]:g} GiB, more than "
            f"one {CPU_MACHINES[-1]} node holds",
            "lower its requests",
        )
    nodes: list[list[float]] = []
    for cpu, mem in sorted(pods, reverse=True):
        for node in nodes:
            if node[0] >= cpu and node[1] >= mem:
                node[0] -= cpu
                node[1] -= mem
                break
        else:
            nodes.append([cap_cpu - cpu, cap_mem - mem])
    return CpuPool(f"{release}-cpu", machine, len(nodes), len(pods))
