"""`tpu-launcher gke plan|up|down`: the gcloud commands that make (and unmake) what a release
needs on GKE, from an empty project to a cluster `helm install` can schedule on. Each step
carries the check that tells whether it is done already, so `gke up` and the printed script
both pick up where a previous run stopped. Where each flag comes from: docs/gke.md.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from launcher.client.chart_source import chart_repository
from launcher.client.commands import run
from launcher.client.gke_release import (
    CpuPool,
    Identity,
    NodePool,
    ReleaseNeeds,
    cpu_pool,
)
from launcher.client.gke_target import CREATED_BY, REPOSITORY, GkeTarget
from launcher.client.image_tag import DOCKERFILE, image_tag_of
from launcher.core.capacity import AUTOSCALED_FROM_ZERO, RESERVATION_NAME
from launcher.core.errors import UsageError

PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
# GKE node pool names: lowercase letters, digits and hyphens, a letter first, at most 40.
POOL_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
# The cluster's own small pool when `gke up` creates the cluster (kube-system lives there).
SYSTEM_MACHINE = "e2-standard-4"
CLOUDBUILD = "images/launcher/cloudbuild.yaml"


@dataclass(frozen=True)
class Check:
    """A read-only command that tells whether a step is done: it succeeds (and prints `output`,
    when given); `negate` turns it round (a deletion is done when its object is gone)."""

    argv: list[str]
    output: str | None = None
    negate: bool = False
    contains: bool = False  # `output` is a line of what it prints, not all of it

    def done(self, proc_ok: bool, stdout: str) -> bool:
        said = stdout.strip().splitlines() if self.contains else [stdout.strip()]
        found = proc_ok and (self.output is None or self.output in said)
        return found != self.negate


@dataclass(frozen=True)
class Step:
    what: str
    argv: list[str]
    done_if: Check | None = None
    capture_as: str | None = None  # its stdout becomes ${capture_as} in later steps
    # A command that lists items: the step runs once per item, `{item}` in argv replaced.
    for_each: list[str] | None = None
    # What is done already must be what the step would make: when done_if finds it, this
    # check must print its output too, else the plan stops, with `mismatch_fix` as the fix.
    same_as: Check | None = None
    mismatch_fix: str = ""
    # Kept, not done: when this check says so (and its command succeeds), the step is left out
    # and what it printed is named (a cluster that still holds node pools of others).
    keep_if: Check | None = None
    kept_because: str = ""


@dataclass(frozen=True)
class Plan:
    steps: list[Step]
    notes: list[str] = field(default_factory=list)
    stays: list[str] = field(default_factory=list)  # what `gke down` leaves, said before


def _gcloud(*words: str) -> list[str]:
    return ["gcloud", *words]


def _cluster_filter(target: GkeTarget, condition: str) -> Check:
    """Done when the cluster exists and `condition` (a gcloud --filter) holds for it."""
    return Check(
        _gcloud(
            "container",
            "clusters",
            "list",
            f"--project={target.project}",
            f"--location={target.location}",
            f"--filter=name={target.cluster} AND {condition}",
            "--format=value(name)",
        ),
        output=target.cluster,
    )


def _where(target: GkeTarget) -> list[str]:
    return [f"--location={target.location}", f"--project={target.project}"]


def cluster_steps(need: ReleaseNeeds, target: GkeTarget) -> list[Step]:
    """The cluster with the add-ons and Workload Identity, created when it does not exist, or
    brought to that state when it does; then kubectl's credentials."""
    pool = f"{target.project}.svc.id.goog"
    addons = ["RayOperator"] if need.ray else []
    addons += ["GcsFuseCsiDriver"] if need.bucket else []
    describe = _gcloud("container", "clusters", "describe", target.cluster, *_where(target))
    steps = [
        Step(
            f"cluster {target.cluster} (one {SYSTEM_MACHINE} node for GKE's own pods; the "
            "release's pools follow)",
            _gcloud(
                "container",
                "clusters",
                "create",
                target.cluster,
                *_where(target),
                *([f"--addons={','.join(addons)}"] if addons else []),
                f"--workload-pool={pool}",
                "--workload-metadata=GKE_METADATA",
                f"--machine-type={SYSTEM_MACHINE}",
                "--num-nodes=1",
                *([f"--node-locations={target.zone}"] if target.node_zone else []),
                f"--labels={CREATED_BY}",
            ),
            done_if=Check(describe),
        )
    ]
    if addons:
        why = {"RayOperator": "KubeRay and its TPU webhook", "GcsFuseCsiDriver": "the bucket"}
        condition = " AND ".join(
            f"addonsConfig.{a[0].lower() + a[1:]}Config.enabled=true" for a in addons
        )
        steps.append(
            Step(
                "add-ons of an existing cluster: " + ", ".join(f"{a} ({why[a]})" for a in addons),
                _gcloud(
                    "container",
                    "clusters",
                    "update",
                    target.cluster,
                    *_where(target),
                    "--update-addons=" + ",".join(f"{a}=ENABLED" for a in addons),
                ),
                done_if=_cluster_filter(target, condition),
            )
        )
    steps += [
        Step(
            "Workload Identity on an existing cluster (pods act as Google identities, no keys)",
            _gcloud(
                "container",
                "clusters",
                "update",
                target.cluster,
                *_where(target),
                f"--workload-pool={pool}",
            ),
            done_if=_cluster_filter(target, f"workloadIdentityConfig.workloadPool={pool}"),
        ),
        Step(
            "node pools made before Workload Identity: to the GKE metadata server (else their "
            "pods cannot mount the bucket)",
            _gcloud(
                "container",
                "node-pools",
                "update",
                "{item}",
                f"--cluster={target.cluster}",
                *_where(target),
                "--workload-metadata=GKE_METADATA",
            ),
            for_each=_gcloud(
                "container",
                "node-pools",
                "list",
                f"--cluster={target.cluster}",
                *_where(target),
                "--filter=NOT config.workloadMetadataConfig.mode=GKE_METADATA",
                "--format=value(name)",
            ),
        ),
        Step(
            "kubectl's credentials for the cluster",
            _gcloud("container", "clusters", "get-credentials", target.cluster, *_where(target)),
        ),
    ]
    return steps


def _pool_create(name: str, target: GkeTarget, flags: list[str], what: str) -> Step:
    if not POOL_NAME.match(name):
        raise UsageError(
            "--release",
            f"node pool name {name!r} is not a GKE node pool name (a letter first, "
            "lowercase letters, digits and hyphens, at most 40)",
            "use a shorter release name",
        )
    where = [f"--cluster={target.cluster}", *_where(target)]
    describe = _gcloud("container", "node-pools", "describe", name, *where)
    machine = next(f.partition("=")[2] for f in flags if f.startswith("--machine-type="))
    delete = " ".join(_gcloud("container", "node-pools", "delete", name, *where))
    return Step(
        what,
        _gcloud("container", "node-pools", "create", name, *where, *flags),
        done_if=Check(describe),
        # A pool of that name made for another machine (another slice, an older release)
        # would keep the pods Pending: GKE never changes a pool's machine type.
        same_as=Check([*describe, "--format=value(config.machineType)"], output=machine),
        mismatch_fix=f"delete it (`{delete}`: GKE never changes a pool's machine type), then "
        "run again; or give this release another --release name",
    )


def cpu_pool_step(pool: CpuPool, target: GkeTarget) -> Step:
    return _pool_create(
        pool.name,
        target,
        [
            f"--node-locations={target.zone}",
            f"--machine-type={pool.machine}",
            f"--num-nodes={pool.nodes}",
            "--workload-metadata=GKE_METADATA",
        ],
        f"node pool {pool.name}: {pool.nodes} x {pool.machine} for the release's {pool.pods} "
        f"pod{'s' if pool.pods != 1 else ''} without TPUs",
    )


def pool_names(pool: NodePool) -> list[str]:
    """A multi-host slice is a whole node pool: one pool per slice; single-host slices share
    one pool, a node each."""
    if pool.slices.shape.multi_host:
        return [f"{pool.name}-{i}" for i in range(pool.slices.num_slices)]
    return [pool.name]


def workload_policy(pool: NodePool) -> str | None:
    """The workload policy that places a multi-host pool of a generation placed by one (tpu7x):
    one per release pool, named after it."""
    shape = pool.slices.shape
    return (
        f"{pool.name}-placement" if shape.generation.workload_policy and shape.multi_host else None
    )


def _resource_policies(verb: str, *words: str, target: GkeTarget) -> list[str]:
    return _gcloud(
        "compute",
        "resource-policies",
        verb,
        *words,
        f"--region={target.region}",
        f"--project={target.project}",
    )


def tpu_pool_steps(pool: NodePool, target: GkeTarget) -> list[Step]:
    shape = pool.slices.shape
    steps = []
    flags = [
        f"--node-locations={target.zone}",
        f"--machine-type={shape.machine_type}",
        *shape.generation.node_pool_flags,
        "--workload-metadata=GKE_METADATA",
    ]
    # How the TPUs are obtained, as the release's pods ask (ray.worker.tpu.capacity).
    flags += [f.replace(RESERVATION_NAME, pool.reservation or "") for f in pool.capacity.pool_flags]
    if pool.autoscaled and "--enable-autoscaling" not in flags:
        flags += AUTOSCALED_FROM_ZERO
    # An autoscaled pool starts empty (--num-nodes=0): the slice's hosts are its ceiling.
    nodes = "--total-max-nodes" if pool.autoscaled else "--num-nodes"
    names = pool_names(pool)
    if policy := workload_policy(pool):
        # Ironwood: a HIGH_THROUGHPUT workload policy names the topology and keeps the slice's
        # hosts together; GKE takes it instead of --tpu-topology (GKE: About Ironwood (TPU7x)).
        steps.append(
            Step(
                f"workload policy {policy}: {shape.name}'s topology {shape.topology}, hosts "
                "placed together (Ironwood pools take it instead of --tpu-topology)",
                _resource_policies(
                    "create",
                    "workload-policy",
                    policy,
                    "--type=HIGH_THROUGHPUT",
                    f"--accelerator-topology={shape.topology}",
                    target=target,
                ),
                done_if=Check(_resource_policies("describe", policy, target=target)),
            )
        )
        flags += [f"--placement-policy={policy}", f"{nodes}={shape.hosts}"]
    elif shape.multi_host:
        # COMPACT placement keeps a slice's hosts in one ICI domain, as xpk creates them.
        flags += [
            f"--tpu-topology={shape.topology}",
            f"{nodes}={shape.hosts}",
            "--placement-type=COMPACT",
        ]
    else:  # GKE refuses --tpu-topology on single-host pools
        flags.append(f"{nodes}={pool.slices.num_slices}")
    return steps + [
        _pool_create(
            name,
            target,
            flags,
            f"node pool {name}: {pool.slices.describe()}"
            + (f", slice {i} of {len(names)}" if len(names) > 1 else "")
            + (", empty until a job's pods ask for it" if pool.autoscaled else ""),
        )
        for i, name in enumerate(names, 1)
    ]


def image_steps(
    need: ReleaseNeeds, target: GkeTarget, source: Path | None, chart: Path, helm: str
) -> list[Step]:
    """The Artifact Registry repository (unless --registry names one of yours) and the launcher
    image the release's Ray pods pull, built by Cloud Build (no local Docker needed) from the
    checkout `source`; with no checkout (the chart inside an installed package), the image the
    values pin, which must be in the registry already."""
    if not need.launcher_image:
        return []
    steps = []
    if not target.registry:
        repo = [REPOSITORY, f"--location={target.region}", f"--project={target.project}"]
        steps.append(
            Step(
                f"Artifact Registry repository {REPOSITORY} in {target.region} (the image)",
                _gcloud(
                    "artifacts",
                    "repositories",
                    "create",
                    *repo,
                    "--repository-format=docker",
                    f"--labels={CREATED_BY}",
                ),
                done_if=Check(_gcloud("artifacts", "repositories", "describe", *repo)),
            )
        )
    if source is not None:
        steps.append(image_build_step(need.launcher_image, target, source))
        steps += chart_push_steps(chart, need.launcher_image, target, helm)
    else:
        steps.append(image_present_step(need.launcher_image, target))
    return steps


def describe_image(image: str, target: GkeTarget) -> list[str]:
    """`gcloud artifacts docker images describe IMAGE`: fails when the registry lacks it."""
    project = f"--project={target.project}"
    return _gcloud("artifacts", "docker", "images", "describe", image, project)


PACKAGED = ".local/charts"  # where `helm package` leaves the chart on its way to the registry


def chart_push_steps(chart: Path, image: str, target: GkeTarget, helm: str) -> list[Step]:
    """The chart pushed beside the image, its appVersion the image's tag, so the chart pulled
    from the registry (`install --chart oci://...`) runs the image pushed with it. Helm reaches
    Artifact Registry with the gcloud login through Docker's credential helper ("Configure
    authentication to Artifact Registry for Helm": reuse Docker credentials)."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    name, version = meta["name"], meta["version"]
    tag = image_tag_of(image) or meta["appVersion"]
    host = target.image_repository[0]
    repository = chart_repository(target.image_repository)
    # Done when the registry's chart of this version was packaged for this image.
    pushed = Check(
        [helm, "show", "chart", f"{repository}/{name}", "--version", version],
        output=f"appVersion: {tag}",
        contains=True,
    )
    steps = []
    if host.endswith("-docker.pkg.dev"):
        login = _gcloud("auth", "configure-docker", host, "--quiet")
        what = f"Helm and Docker reach {host} with your gcloud login (a credential helper)"
        steps.append(Step(what, login, done_if=pushed))
    package = [helm, "package", str(chart), "--app-version", tag, "--destination", PACKAGED]
    push = [helm, "push", f"{PACKAGED}/{name}-{version}.tgz", repository]
    return [
        *steps,
        Step(f"chart {name} {version} packaged for image {tag}", package, done_if=pushed),
        Step(f"chart pushed to {repository} (install --chart {repository}/{name})", push, pushed),
    ]


def image_present_step(image: str, target: GkeTarget) -> Step:
    """No checkout here to build from: the pinned image must exist (its describe fails, with
    gcloud's own words, and the plan stops before anything after it is made)."""
    return Step(
        f"launcher image {image} is in the registry (pushed by `tpu-launcher image` from a "
        "clone of this version; nothing here builds it)",
        describe_image(image, target),
    )


def image_build_step(image: str, target: GkeTarget, source: Path) -> Step:
    """Cloud Build builds images/launcher/Dockerfile from `source` (the checkout) and pushes
    `image`; skipped when that tag is in the registry already (`tpu-launcher image` rebuilds)."""
    return Step(
        f"launcher image {image} (Cloud Build: {DOCKERFILE})",
        _gcloud(
            "builds",
            "submit",
            str(source),
            f"--project={target.project}",
            f"--config={source / CLOUDBUILD}",
            f"--substitutions=_IMAGE={image}",
        ),
        done_if=Check(describe_image(image, target)),
    )


def bucket_steps(need: ReleaseNeeds, target: GkeTarget) -> list[Step]:
    if not need.bucket:
        return []
    steps = [
        Step(
            f"checkpoint bucket gs://{need.bucket} (hierarchical namespace: atomic folder renames)",
            _gcloud(
                "storage",
                "buckets",
                "create",
                f"gs://{need.bucket}",
                f"--project={target.project}",
                # A bucket lives in a region (or multi-region), never in a zone.
                f"--location={target.bucket_location or target.region}",
                "--uniform-bucket-level-access",
                "--enable-hierarchical-namespace",
            ),
            done_if=Check(_gcloud("storage", "buckets", "describe", f"gs://{need.bucket}")),
        )
    ]
    if any(not i.gcp_service_account for i in need.identities):
        steps.append(
            Step(
                "the project's number (Workload Identity principals name it)",
                _gcloud("projects", "describe", target.project, "--format=value(projectNumber)"),
                capture_as="PROJECT_NUMBER",
            )
        )
    for identity in need.identities:
        steps += _grant_steps(identity, need, target)
    return steps


def _grant_steps(identity: Identity, need: ReleaseNeeds, target: GkeTarget) -> list[Step]:
    """The bucket for one part's identity: objectUser where its pods write (training's
    checkpoints, Saxml's state), objectViewer where they only read (serving), so a compromised
    model server cannot rewrite checkpoints."""
    role, may = (
        ("roles/storage.objectUser", "read and write")
        if identity.writes
        else ("roles/storage.objectViewer", "read")
    )
    account = identity.account
    if gsa := identity.gcp_service_account:
        return [
            Step(
                f"{gsa} may {may} gs://{need.bucket}",
                _gcloud(
                    "storage",
                    "buckets",
                    "add-iam-policy-binding",
                    f"gs://{need.bucket}",
                    f"--member=serviceAccount:{gsa}",
                    f"--role={role}",
                ),
            ),
            Step(
                f"the release's service account {account} may act as it",
                _gcloud(
                    "iam",
                    "service-accounts",
                    "add-iam-policy-binding",
                    gsa,
                    f"--project={target.project}",
                    "--role=roles/iam.workloadIdentityUser",
                    f"--member=serviceAccount:{target.project}.svc.id.goog"
                    f"[{need.namespace}/{account}]",
                ),
            ),
        ]
    return [
        Step(
            f"the release's service account {account} may {may} gs://{need.bucket}",
            _gcloud(
                "storage",
                "buckets",
                "add-iam-policy-binding",
                f"gs://{need.bucket}",
                "--member=principal://iam.googleapis.com/projects/${PROJECT_NUMBER}/"
                f"locations/global/workloadIdentityPools/{target.project}.svc.id.goog/"
                f"subject/ns/{need.namespace}/sa/{account}",
                f"--role={role}",
            ),
        )
    ]


def up_plan(
    need: ReleaseNeeds,
    target: GkeTarget,
    release: str,
    source: Path | None,
    chart: Path,
    helm: str = "helm",
) -> Plan:
    """In the order they can run, what bills most last: cluster, credentials, CPU pool,
    registry, image and chart, bucket and access, then the TPU pools, so no TPU host bills
    while the image builds, or at all when a step before them fails."""
    steps = cluster_steps(need, target)
    if cpu := cpu_pool(release, need.cpu_pods):
        steps.append(cpu_pool_step(cpu, target))
    steps += image_steps(need, target, source, chart, helm)
    steps += bucket_steps(need, target)
    for pool in need.pools:
        steps += tpu_pool_steps(pool, target)
    notes = ["What GKE needs before `helm install` can schedule this release."]
    if unset := unset_variables(steps):
        notes.append(
            f"Set {', '.join(unset)} first (or pass --project, --cluster, --location, "
            "--node-zone, --bucket)."
        )
    if not need.pools:
        notes.append("This release asks for no TPU nodes: no TPU node pools to create.")
    for gen in {
        p.slices.shape.generation.name: p.slices.shape.generation for p in need.pools
    }.values():
        if gen.min_gke_version:
            notes.append(
                f"{gen.name} node pools need GKE Standard {gen.min_gke_version} or later: a new "
                "cluster gets a later version; for an existing one `gcloud container clusters "
                f"describe {target.cluster} {' '.join(_where(target))} "
                "--format='value(currentMasterVersion)'` shows its own."
            )
    if need.jobset:
        notes.append(
            "Saxml's model servers are a JobSet: the JobSet controller (v0.12 or newer) must run "
            "in the cluster (kubernetes-sigs/jobset releases)."
        )
    return Plan(steps, notes)


def down_plan(
    need: ReleaseNeeds, target: GkeTarget, release: str, namespace: str, helm: str = "helm"
) -> Plan:
    """What `gke up` made, removed: the release, its node pools, the image repository and the
    cluster (only a cluster or repository `gke up` created). The bucket stays."""
    where = [f"--cluster={target.cluster}", *_where(target)]
    # The context get-credentials writes: never the release of another cluster.
    helm_where = [f"--namespace={namespace}", f"--kube-context={target.kube_context}"]
    cluster_gone = Check(
        _gcloud("container", "clusters", "describe", target.cluster, *_where(target)),
        negate=True,
    )
    steps = [
        Step(
            "(first, kubectl's credentials for the cluster, to reach the release: not deleted)",
            _gcloud("container", "clusters", "get-credentials", target.cluster, *_where(target)),
            done_if=cluster_gone,
        ),
        Step(
            f"helm release {release} in namespace {namespace}",
            [helm, "uninstall", release, *helm_where, "--wait"],
            done_if=Check([helm, "status", release, *helm_where], negate=True),
        ),
    ]
    names = [n for pool in need.pools for n in pool_names(pool)]
    if cpu := cpu_pool(release, need.cpu_pods):
        names.append(cpu.name)
    for name in names:
        describe = _gcloud("container", "node-pools", "describe", name, *where)
        steps.append(
            Step(
                f"node pool {name}",
                _gcloud("container", "node-pools", "delete", name, *where, "--quiet"),
                done_if=Check(describe, negate=True),
            )
        )
    for policy in filter(None, map(workload_policy, need.pools)):
        steps.append(
            Step(
                f"workload policy {policy} (its node pools are gone)",
                _resource_policies("delete", policy, "--quiet", target=target),
                done_if=Check(_resource_policies("describe", policy, target=target), negate=True),
            )
        )
    # Node pools of others (another release's, one made by hand) hold the cluster, and the
    # image repository their pods pull from: only GKE's own default pool may be left.
    others = _gcloud(
        "container", "node-pools", "list", *where,
        "--filter=NOT name=default-pool", "--format=value(name)",
    )  # fmt: skip
    held = Check(others, output="", negate=True)
    if need.launcher_image and not target.registry:
        repo = [REPOSITORY, f"--location={target.region}", f"--project={target.project}"]
        steps.append(
            Step(
                f"Artifact Registry repository {REPOSITORY} and its images (if gke up made it)",
                _gcloud("artifacts", "repositories", "delete", *repo, "--quiet"),
                done_if=Check(_repo_ours(target), output=REPOSITORY, negate=True),
                keep_if=held,
                kept_because="other node pools of the cluster may pull from it",
            )
        )
    steps.append(
        Step(
            f"cluster {target.cluster} (if gke up made it, and nothing else is in it)",
            _gcloud("container", "clusters", "delete", target.cluster, *_where(target), "--quiet"),
            done_if=replace(_cluster_filter(target, f"resourceLabels.{CREATED_BY}"), negate=True),
            keep_if=held,
            kept_because="these node pools of others are in it (`gke down` of their release "
            "deletes them; then run it again)",
        )
    )
    stays = []
    if need.bucket:
        stays.append(
            f"gs://{need.bucket} and its checkpoints stay (a resubmission resumes from them); "
            f"`gcloud storage rm -r gs://{need.bucket}` deletes them for good"
        )
        if need.identities:
            stays.append(
                f"the IAM bindings that let the release's service accounts use gs://{need.bucket} "
                f"stay on the bucket (`gcloud storage buckets get-iam-policy gs://{need.bucket}` "
                "lists them; remove-iam-policy-binding removes one)"
            )
    return Plan(steps, ["What `gke up` made for this release, deleted."], stays)


def _repo_ours(target: GkeTarget) -> list[str]:
    """Prints the repository's short name when it exists and carries our label."""
    return _gcloud(
        "artifacts",
        "repositories",
        "list",
        f"--location={target.region}",
        f"--project={target.project}",
        f"--filter=name~/{REPOSITORY}$ AND labels.{CREATED_BY}",
        "--format=value(name.basename())",
    )


def _shell_word(arg: str) -> str:
    """Quotes for the shell, leaving ${VARS} to expand."""
    if re.fullmatch(r"[\w@%+=:,./${}\[\]-]+", arg):
        return arg
    if "${" in arg and not re.search(r'["\\`]|\$\(', arg):
        return f'"{arg}"'
    return shlex.quote(arg)


def _command(argv: list[str]) -> str:
    words = [_shell_word(a) for a in argv]
    cut = next((i for i, w in enumerate(words) if w.startswith("--")), len(words))
    return " \\\n    ".join([" ".join(words[:cut]), *words[cut:]])


def _guard(check: Check) -> str:
    """A shell test that is true when the step is done."""
    quiet = " ".join(_shell_word(a) for a in check.argv)
    if check.output is not None and check.contains:
        test = f"{quiet} 2>/dev/null | grep -qxF {_shell_word(check.output)}"
    elif check.output is not None:
        test = f'[ "$({quiet} 2>/dev/null)" = {_shell_word(check.output)} ]'
    else:
        test = f"{quiet} >/dev/null 2>&1"
    return f"! {test}" if check.negate else test


def format_plan(plan: Plan) -> str:
    """A bash script of the plan: each step guarded by its check, so it can run twice."""
    lines = ["#!/usr/bin/env bash", "set -euo pipefail"]
    lines += [f"# {n}" for n in plan.notes]
    for step in plan.steps:
        lines.append(f"\n# {step.what}")
        command = _command(step.argv)
        if step.capture_as:
            command = f"{step.capture_as}=$({command})"
        if step.for_each:
            listing = " ".join(_shell_word(a) for a in step.for_each)
            command = f"for item in $({listing}); do\n  {command.replace('{item}', '$item')}\ndone"
        if step.done_if and step.same_as:
            refuse = _shell_word(
                f"error: {step.what} exists, not as {step.same_as.output}; fix: {step.mismatch_fix}"
            )
            lines.append(
                f"if {_guard(step.done_if)}; then\n  {_guard(step.same_as)} || "
                f"{{ echo {refuse} >&2; exit 1; }}\nfi"
            )
        if step.done_if:
            command = f"{_guard(step.done_if)} ||\n  {command}"
        if step.keep_if:  # kept: {kept_because}
            command = f"{_guard(step.keep_if)} ||\n  {command}"
        lines.append(command)
    lines += [f"# {s}" for s in plan.stays]
    return "\n".join(lines) + "\n"


def unset_variables(steps: list[Step]) -> list[str]:
    """The ${VARS} the plan still needs from its user (not those a step captures)."""
    captured = {s.capture_as for s in steps}
    found = {m for s in steps for a in s.argv for m in PLACEHOLDER.findall(a)}
    return sorted(found - captured)


def execute(plan: Plan, say: Callable[[str], None] = print) -> int:
    """Runs the steps in order and stops at the first failure; a step whose check says it is
    done is skipped, so a second run picks up where the first stopped."""
    if unset := unset_variables(plan.steps):
        raise UsageError(
            "target",
            f"{', '.join(unset)} not given",
            "pass --project, --cluster, --location (and --node-zone for a regional cluster, "
            "--bucket unless the values name the bucket), or export PROJECT_ID, CLUSTER_NAME, "
            "LOCATION, NODE_ZONE, BUCKET",
        )
    missing = sorted({s.argv[0] for s in plan.steps if shutil.which(s.argv[0]) is None})
    if missing:
        print(
            f"{' and '.join(missing)} not installed on this machine: nothing was done. The "
            "commands:\n",
            file=sys.stderr,
        )
        print(format_plan(plan))
        return 1
    captured: dict[str, str] = {}
    total = len(plan.steps)
    for i, step in enumerate(plan.steps, 1):
        if step.keep_if:
            proc = run(f"check {step.what}", step.keep_if.argv, check=False, capture=True)
            if proc.returncode == 0 and step.keep_if.done(True, proc.stdout):
                held = ", ".join(proc.stdout.split())
                say(f"[{i}/{total}] {step.what}: kept, {step.kept_because}: {held}")
                continue
        if step.done_if:
            proc = run(f"check {step.what}", step.done_if.argv, check=False, capture=True)
            if step.done_if.done(proc.returncode == 0, proc.stdout):
                if step.same_as is not None:
                    same = run(f"check {step.what}", step.same_as.argv, check=False, capture=True)
                    if not step.same_as.done(same.returncode == 0, same.stdout):
                        raise UsageError(
                            "values",
                            f"{step.what}: one of that name exists, made otherwise "
                            f"({same.stdout.strip() or 'unreadable'}, not {step.same_as.output})",
                            step.mismatch_fix,
                        )
                say(f"[{i}/{total}] {step.what}: done already, skipped")
                continue
        say(f"[{i}/{total}] {step.what}")
        argv = [PLACEHOLDER.sub(lambda m: captured.get(m[1], m[0]), a) for a in step.argv]
        if step.for_each:
            items = run(f"list {step.what}", step.for_each, capture=True).stdout.split()
            say(f"  {', '.join(items) if items else 'none'}")
            for item in items:
                run(step.what, [a.replace("{item}", item) for a in argv])
            continue
        proc = run(step.what, argv, capture=bool(step.capture_as))
        if step.capture_as:
            captured[step.capture_as] = proc.stdout.strip()
    say(f"done: {total} steps")
    return 0
