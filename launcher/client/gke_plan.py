"""What GKE must have before a release schedules anything, as the gcloud commands that create it:
read from the chart's own rendering of the release (`helm template`), so the node pools are the
ones the pods select, the bucket the one they mount and the service account the one they run as.

Every flag was checked against gcloud's reference pages (cloud.google.com/sdk/gcloud/reference/):
- container/node-pools/create: --cluster, --location, --node-locations, --machine-type,
  --tpu-topology, --num-nodes, --placement-type, --spot, --reservation-affinity, --reservation.
  GKE's "Deploy TPU workloads in GKE Standard" (kubernetes-engine/docs/how-to/tpus): a multi-host
  slice is one node pool of chips / chips-per-host nodes with --tpu-topology; a single-host pool
  takes no --tpu-topology (the API refuses one). COMPACT placement keeps a slice's hosts on one
  ICI domain, as xpk creates them.
- container/clusters/update: --update-addons=RayOperator=ENABLED,GcsFuseCsiDriver=ENABLED (the
  Ray operator add-on brings KubeRay and its TPU webhook), --workload-pool.
- storage/buckets/create: --location, --uniform-bucket-level-access,
  --enable-hierarchical-namespace (needs uniform access; storage/docs/create-hns-bucket).
- storage/buckets/add-iam-policy-binding and iam/service-accounts/add-iam-policy-binding:
  --member, --role (roles/storage.objectUser on the bucket; roles/iam.workloadIdentityUser for a
  Google service account), as the GKE tutorials grant them.
- projects/describe: --format=value(projectNumber).
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from launcher.client.commands import run
from launcher.core.errors import CommandError, UsageError
from launcher.core.slices import Slices, from_pod_spec
from launcher.core.values_file import load_values

PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
# GKE node pool names: lowercase letters, digits and hyphens, a letter first, at most 40.
POOL_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
# Renders without a bucket use this name; the plan then shows ${BUCKET}.
_RENDER_BUCKET = "bucket-placeholder"


@dataclass(frozen=True)
class GkeTarget:
    """Where the release goes; unset fields stay shell variables in the printed plan."""

    project: str = "${PROJECT_ID}"
    cluster: str = "${CLUSTER_NAME}"
    location: str = "${LOCATION}"  # the cluster's region or zone
    node_zone: str | None = None  # the zone of the TPU node pools (default: a zonal location)
    bucket_location: str | None = None  # default: the region of `location`
    spot: bool = False
    reservation: str | None = None


@dataclass(frozen=True)
class NodePool:
    name: str
    slices: Slices


@dataclass(frozen=True)
class ReleaseNeeds:
    """What the rendered release asks GKE for."""

    pools: list[NodePool]
    namespace: str
    service_account: str
    gcp_service_account: str | None
    ray: bool
    jobset: bool


@dataclass(frozen=True)
class Step:
    what: str
    argv: list[str]
    exists: list[str] | None = None  # a describe command: when it succeeds, the step is done
    capture_as: str | None = None  # its stdout becomes ${capture_as} in later steps


def render(
    chart: Path, values: list[str], release: str, namespace: str, bucket: str | None, helm: str
) -> tuple[list[dict], str | None]:
    """The release's objects as Helm renders them, and the bucket they mount (None: not given)."""
    merged = load_values(chart / "values.yaml", *values)
    gcsfuse = merged.get("global", {}).get("gcsfuse", {})
    bucket = bucket or gcsfuse.get("bucketName") or None
    argv = [helm, "template", release, str(chart), "--namespace", namespace]
    for path in values:
        argv += ["-f", path]
    argv += ["--set", f"global.gcsfuse.bucketName={bucket or _RENDER_BUCKET}"]
    proc = run("render the release", argv, capture=True, check=False)
    if proc.returncode:
        raise CommandError("render the release", argv, proc.returncode, proc.stderr)
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    return docs, (bucket or _RENDER_BUCKET) if gcsfuse.get("enabled", True) else None


def needs(docs: list[dict], namespace: str, release: str) -> ReleaseNeeds:
    """What the rendered objects ask GKE for: a node pool per TPU worker group (RayCluster),
    per replicated Job (Saxml's JobSet) and per TPU Deployment (vLLM), the account the pods run
    as, the add-ons."""
    pools: list[NodePool] = []
    service_account, pods_account, gsa = "", "", None
    ray = jobset = False
    for doc in docs:
        kind = doc.get("kind")
        if "helm.sh/hook" in doc["metadata"].get("annotations", {}):
            continue  # helm test's objects are not the release's
        if kind == "ServiceAccount":
            service_account = doc["metadata"]["name"]
            gsa = doc["metadata"].get("annotations", {}).get("iam.gke.io/gcp-service-account")
        elif kind == "RayCluster":
            ray = True
            # With serviceAccount.create=false the account exists already: the pods name it.
            pods_account = doc["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"]
            for group in doc["spec"].get("workerGroupSpecs", []):
                found = from_pod_spec(group["template"]["spec"], group.get("replicas", 1))
                if found:
                    pools.append(NodePool(f"{release}-ray-{found.shape.pod_type}", found))
        elif kind == "JobSet":
            jobset = True
            for rj in doc["spec"]["replicatedJobs"]:
                pod = rj["template"]["spec"]["template"]["spec"]
                pods_account = pods_account or pod.get("serviceAccountName", "")
                found = from_pod_spec(pod, rj.get("replicas", 1))
                if found:
                    pools.append(NodePool(f"{release}-sax-{found.shape.pod_type}", found))
        elif kind == "Deployment":  # vLLM: each replica one single-host slice
            pod = doc["spec"]["template"]["spec"]
            found = from_pod_spec(pod, doc["spec"].get("replicas", 1))
            if found:
                pods_account = pods_account or pod.get("serviceAccountName", "")
                pools.append(NodePool(f"{release}-vllm-{found.shape.pod_type}", found))
    return ReleaseNeeds(pools, namespace, service_account or pods_account, gsa, ray, jobset)


def _is_zone(location: str) -> bool:
    return re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", location) is not None


def _region(location: str) -> str:
    """us-east5-b -> us-east5; a region or a placeholder stays as it is."""
    return location[:-2] if _is_zone(location) else location


def _node_pool_steps(pool: NodePool, target: GkeTarget) -> list[Step]:
    shape = pool.slices.shape
    # TPU capacity is zonal: a regional cluster needs the zone of its TPU pools.
    zone = target.node_zone or (target.location if _is_zone(target.location) else "${NODE_ZONE}")
    common = [
        f"--cluster={target.cluster}",
        f"--location={target.location}",
        f"--project={target.project}",
        f"--node-locations={zone}",
        f"--machine-type={shape.machine_type}",
    ]
    options = ["--spot"] if target.spot else []
    if target.reservation:
        options += ["--reservation-affinity=specific", f"--reservation={target.reservation}"]
    if shape.multi_host:
        # A multi-host slice is a whole node pool: one pool per slice.
        names = [f"{pool.name}-{i}" for i in range(pool.slices.num_slices)]
        flags = [
            *common,
            f"--tpu-topology={shape.topology}",
            f"--num-nodes={shape.hosts}",
            "--placement-type=COMPACT",
            *options,
        ]
    else:
        # One node per single-host slice; GKE refuses --tpu-topology on single-host pools.
        names = [pool.name]
        flags = [*common, f"--num-nodes={pool.slices.num_slices}", *options]
    steps = []
    for i, name in enumerate(names, 1):
        if not POOL_NAME.match(name):
            raise UsageError(
                "RELEASE",
                f"node pool name {name!r} is not a GKE node pool name (a letter first, "
                "lowercase letters, digits and hyphens, at most 40)",
                "use a shorter release name (RELEASE=...)",
            )
        where = [f"--cluster={target.cluster}", f"--location={target.location}"]
        steps.append(
            Step(
                f"node pool {name}: {pool.slices.describe()}"
                + (f", slice {i} of {len(names)}" if len(names) > 1 else ""),
                ["gcloud", "container", "node-pools", "create", name, *flags],
                exists=[
                    "gcloud",
                    "container",
                    "node-pools",
                    "describe",
                    name,
                    *where,
                    f"--project={target.project}",
                ],
            )
        )
    return steps


def plan(need: ReleaseNeeds, bucket: str | None, target: GkeTarget) -> list[Step]:
    """The gcloud commands, in the order they can run: add-ons, node pools, bucket, access."""
    steps: list[Step] = []
    cluster = [f"--location={target.location}", f"--project={target.project}"]
    addons = {
        a: why
        for a, why, on in (
            ("RayOperator", "KubeRay and its TPU webhook", need.ray),
            ("GcsFuseCsiDriver", "the bucket as a volume", bucket),
        )
        if on
    }
    if addons:
        steps.append(
            Step(
                "cluster add-ons: " + ", ".join(f"{a} ({why})" for a, why in addons.items()),
                [
                    "gcloud",
                    "container",
                    "clusters",
                    "update",
                    target.cluster,
                    *cluster,
                    "--update-addons=" + ",".join(f"{a}=ENABLED" for a in addons),
                ],
            )
        )
    steps.append(
        Step(
            "Workload Identity on the cluster (pods act as Google identities, no keys)",
            [
                "gcloud",
                "container",
                "clusters",
                "update",
                target.cluster,
                *cluster,
                f"--workload-pool={target.project}.svc.id.goog",
            ],
        )
    )
    for pool in need.pools:
        steps += _node_pool_steps(pool, target)
    if bucket:
        b = "${BUCKET}" if bucket == _RENDER_BUCKET else bucket
        steps.append(
            Step(
                f"checkpoint bucket gs://{b} (hierarchical namespace: atomic folder renames)",
                [
                    "gcloud",
                    "storage",
                    "buckets",
                    "create",
                    f"gs://{b}",
                    f"--project={target.project}",
                    f"--location={target.bucket_location or _region(target.location)}",
                    "--uniform-bucket-level-access",
                    "--enable-hierarchical-namespace",
                ],
                exists=["gcloud", "storage", "buckets", "describe", f"gs://{b}"],
            )
        )
        ksa = f"ns/{need.namespace}/sa/{need.service_account}"
        if need.gcp_service_account:
            steps += [
                Step(
                    f"{need.gcp_service_account} may read and write gs://{b}",
                    [
                        "gcloud",
                        "storage",
                        "buckets",
                        "add-iam-policy-binding",
                        f"gs://{b}",
                        f"--member=serviceAccount:{need.gcp_service_account}",
                        "--role=roles/storage.objectUser",
                    ],
                ),
                Step(
                    f"the release's service account {need.service_account} may act as it",
                    [
                        "gcloud",
                        "iam",
                        "service-accounts",
                        "add-iam-policy-binding",
                        need.gcp_service_account,
                        f"--project={target.project}",
                        "--role=roles/iam.workloadIdentityUser",
                        f"--member=serviceAccount:{target.project}.svc.id.goog"
                        f"[{need.namespace}/{need.service_account}]",
                    ],
                ),
            ]
        else:
            steps += [
                Step(
                    "the project's number (Workload Identity principals name it)",
                    [
                        "gcloud",
                        "projects",
                        "describe",
                        target.project,
                        "--format=value(projectNumber)",
                    ],
                    capture_as="PROJECT_NUMBER",
                ),
                Step(
                    f"the release's service account {need.service_account} may read and write "
                    f"gs://{b}",
                    [
                        "gcloud",
                        "storage",
                        "buckets",
                        "add-iam-policy-binding",
                        f"gs://{b}",
                        "--member=principal://iam.googleapis.com/projects/${PROJECT_NUMBER}/"
                        f"locations/global/workloadIdentityPools/{target.project}.svc.id.goog/"
                        f"subject/{ksa}",
                        "--role=roles/storage.objectUser",
                    ],
                ),
            ]
    return steps


def _shell_word(arg: str) -> str:
    """Quotes for the shell, leaving ${VARS} to expand."""
    if re.fullmatch(r"[\w@%+=:,./${}\[\]-]+", arg):
        return arg
    return shlex.quote(arg)


def format_plan(steps: list[Step], notes: list[str]) -> str:
    lines = ["#!/usr/bin/env bash", "set -euo pipefail"]
    lines += [f"# {n}" for n in notes]
    for step in steps:
        lines.append(f"\n# {step.what}")
        words = [_shell_word(a) for a in step.argv]
        head = " ".join(words[:5]) if words[1] != "projects" else " ".join(words)
        rest = words[5:] if words[1] != "projects" else []
        command = " \\\n    ".join([head, *rest])
        lines.append(f"{step.capture_as}=$({command})" if step.capture_as else command)
    return "\n".join(lines) + "\n"


def unset_variables(steps: list[Step]) -> list[str]:
    """The ${VARS} the plan still needs from its user (not those a step captures)."""
    captured = {s.capture_as for s in steps}
    found = {m for s in steps for a in s.argv for m in PLACEHOLDER.findall(a)}
    return sorted(found - captured)


def notes_for(need: ReleaseNeeds, steps: list[Step]) -> list[str]:
    notes = ["What GKE needs before `helm install` can schedule this release."]
    if unset := unset_variables(steps):
        notes.append(
            "Set "
            + ", ".join(unset)
            + " first (make gke-plan: PROJECT=, CLUSTER=, LOCATION=, NODE_ZONE=, BUCKET=)."
        )
    if not need.pools:
        notes.append("This release asks for no TPU nodes: no node pools to create.")
    if need.jobset:
        notes.append(
            "Saxml's model servers are a JobSet: the JobSet controller (v0.12 or newer) must run "
            "in the cluster (kubernetes-sigs/jobset releases)."
        )
    return notes


def up(steps: list[Step], notes: list[str]) -> int:
    """Runs the steps in order and stops at the first failure; a step whose `exists` check
    passes is skipped, so a second run picks up where the first stopped."""
    unset = unset_variables(steps)
    if shutil.which("gcloud") is None:
        print("gcloud is not installed on this machine: nothing was created. The commands:\n")
        print(format_plan(steps, notes))
        return 1
    if unset:
        raise UsageError(
            "gke-up",
            f"{', '.join(unset)} not given",
            "pass PROJECT=, CLUSTER=, LOCATION= (and NODE_ZONE= for a regional cluster, BUCKET= "
            "unless the values name the bucket)",
        )
    captured: dict[str, str] = {}
    for i, step in enumerate(steps, 1):
        argv = [PLACEHOLDER.sub(lambda m: captured.get(m[1], m[0]), a) for a in step.argv]
        if (
            step.exists
            and run(f"look for {step.what}", step.exists, check=False, capture=True).returncode == 0
        ):
            print(f"[{i}/{len(steps)}] {step.what}: exists, skipped", flush=True)
            continue
        print(f"[{i}/{len(steps)}] {step.what}", flush=True)
        proc = run(step.what, argv, capture=bool(step.capture_as))
        if step.capture_as:
            captured[step.capture_as] = proc.stdout.strip()
    print(f"done: {len(steps)} steps")
    return 0


@dataclass(frozen=True)
class GkePlanRequest:
    values: list[str]
    release: str = "tpu"
    namespace: str = "default"
    chart: str = "charts/tpu-stack"
    helm: str = "helm"
    bucket: str | None = None
    target: GkeTarget = GkeTarget()
    execute: bool = False


def gke_plan(request: GkePlanRequest) -> int:
    """`make gke-plan` prints the commands; `make gke-up` (execute) runs them."""
    chart = Path(request.chart)
    if not (chart / "Chart.yaml").is_file():
        raise UsageError("chart", f"no chart at {chart}", "run from the checkout or pass --chart")
    for path in request.values:
        if not Path(path).is_file():
            raise UsageError(
                "VALUES", f"no values file {path}", "ls values/ lists the shipped ones"
            )
    docs, bucket = render(
        chart, request.values, request.release, request.namespace, request.bucket, request.helm
    )
    need = needs(docs, request.namespace, request.release)
    steps = plan(need, bucket, request.target)
    notes = notes_for(need, steps)
    if request.execute:
        return up(steps, notes)
    print(format_plan(steps, notes), end="")
    return 0
