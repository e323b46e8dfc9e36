"""`tpu-launcher gke plan|up|down`: the gcloud commands that make (and unmake) what a release
needs on GKE, from an empty project to a cluster `helm install` can schedule on. Each step
carries the check that tells whether it is done already (gke/steps.py runs them), so `gke up`
and the printed script both pick up where a previous run stopped. Where each flag comes from:
docs/gke.md.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from launcher.client.gke.access import (
    api_steps,
    apis_needed,
    build_account,
    build_staging,
    image_access_steps,
    node_account_steps,
    project_number_step,
)
from launcher.client.gke.image import image_steps
from launcher.client.gke.pools import (
    cpu_pool_step,
    metadata_check,
    metadata_migration,
    pool_names,
    require_offered,
    resource_policies,
    spot_shutdown,
    tpu_pool_steps,
    workload_policy,
)
from launcher.client.gke.release import Identity, ReleaseNeeds, cpu_pool
from launcher.client.gke.steps import (
    Check,
    Plan,
    Step,
    gcloud,
    iam_binding,
    location_flags,
    unset_variables,
)
from launcher.client.gke.target import CREATED_BY, REPOSITORY, GkeTarget
from launcher.core.tpu.capacity import COMPUTE_CLASS_MIN_GKE, FLEX_START, FLEX_START_MIN_GKE
from launcher.core.tpu.preemption import SPOT_SHUTDOWN_MIN_GKE
from launcher.core.tpu.table import AI_ZONES_SOURCE, gke_version, parent_zone

# The cluster's own small pool when `gke up` creates the cluster (kube-system lives there).
SYSTEM_MACHINE = "e2-standard-4"
# gcloud's `container clusters create --addons`: "Addons specified by this flag will be enabled.
# The others will be disabled. Default addons: HttpLoadBalancing, HorizontalPodAutoscaling."
# Named beside the release's own, so a cluster gke up makes keeps GKE's defaults.
DEFAULT_ADDONS = ("HttpLoadBalancing", "HorizontalPodAutoscaling")
# What enforces NetworkPolicy on GKE: Dataplane V2 (GKE: "About Dataplane V2": "built-in network
# policy enforcement"; chosen at creation only) or network policy enforcement (Calico) turned on.
ENFORCES_NETWORK_POLICY = (
    "(networkConfig.datapathProvider=ADVANCED_DATAPATH OR networkPolicy.enabled=true)"
)


def _cluster_filter(target: GkeTarget, condition: str) -> Check:
    """Done when the cluster exists and `condition` (a gcloud --filter) holds for it."""
    return Check(
        gcloud(
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


def _minimum_version(need: ReleaseNeeds) -> tuple[str, str] | None:
    """The oldest GKE version the release's pools may run on, and why (the TPU table's
    generations; flex-start; a capacity fallback's ComputeClass; Spot's longer shutdown)."""
    needed = [
        (p.slices.shape.generation.min_gke_version, f"TPU {p.slices.shape.generation.name}")
        for p in need.pools
        if p.slices.shape.generation.min_gke_version
    ]
    needed += [
        (FLEX_START_MIN_GKE, "TPUs on flex-start")
        for p in need.pools
        if p.capacity.name == FLEX_START
    ]
    needed += [
        (COMPUTE_CLASS_MIN_GKE, f"ComputeClass {p.compute_class}'s rules")
        for p in need.pools
        if p.compute_class
    ]
    needed += [
        (SPOT_SHUTDOWN_MIN_GKE, "Spot pods given more than GKE's 15 s of a reclaim")
        for p in need.pools
        if spot_shutdown(p)
    ]
    return max(needed, key=lambda n: gke_version(n[0])) if needed else None


CHANNEL = "regular"  # the release channel a cluster `gke up` makes is on


def ai_zone_visible(target: GkeTarget) -> Step:
    """An AI zone is seen only by a project whose AI zone visibility is on (Compute Engine's
    "AI zones": "To view AI zones in the Google Cloud console, Google Cloud CLI, and REST API,
    you must enable AI zone visibility for your project"): asked before anything is made."""
    zone = target.zone
    return Step(
        f"the project sees AI zone {zone} (its TPU pools go there; the rest to "
        f"{target.system_zone})",
        [],
        done_if=Check(
            [
                *gcloud("compute", "zones", "describe", zone, f"--project={target.project}"),
                "--format=value(name)",
            ],
            output=zone,
        ),
        required=True,
        mismatch_fix=f"turn on AI zone visibility for project {target.project} ({AI_ZONES_SOURCE}:"
        ' "Manage AI zone visibility"), then run again; or --node-zone a standard zone that '
        "offers the slice",
    )


def cluster_steps(need: ReleaseNeeds, target: GkeTarget) -> list[Step]:
    """The cluster with the add-ons and Workload Identity, created when it does not exist, or
    brought to that state when it does; its version checked; then kubectl's credentials."""
    pool = f"{target.project}.svc.id.goog"
    addons = ["RayOperator"] if need.ray else []
    addons += ["GcsFuseCsiDriver"] if need.bucket else []
    describe = gcloud("container", "clusters", "describe", target.cluster, *location_flags(target))
    least = _minimum_version(need)
    steps = []
    if least:
        # Before a cluster bills: the one `create` makes runs the channel's default version
        # (GKE's "About release channels"), read from GKE's own server config. An existing
        # cluster is kept out of it: its own version is checked below.
        version, needed_by = least
        where = " ".join(location_flags(target))
        steps.append(
            Step(
                f"a new cluster on GKE's regular channel gets GKE {version} or later "
                f"({needed_by} need it)",
                [],
                done_if=Check(
                    gcloud(
                        "container",
                        "get-server-config",
                        *location_flags(target),
                        "--flatten=channels",
                        f"--filter=channels.channel={CHANNEL.upper()}",
                        "--format=value(channels.defaultVersion)",
                    ),
                    at_least=version,
                ),
                keep_if=Check([*describe, "--format=value(name)"]),
                kept_because="the cluster exists (its own version is checked next)",
                required=True,
                mismatch_fix=f"make the cluster yourself at a version from {version} that the "
                f"channel offers (`gcloud container get-server-config {where}` "
                f"lists them; `gcloud container clusters create {target.cluster} "
                f"--release-channel=rapid --cluster-version=VERSION ...`), then run gke up "
                "again: it takes the cluster as it is",
            )
        )
    steps += [
        Step(
            f"cluster {target.cluster} (one {SYSTEM_MACHINE} node for GKE's own pods; the "
            "release's pools follow)",
            gcloud(
                "container",
                "clusters",
                "create",
                target.cluster,
                *location_flags(target),
                *([f"--addons={','.join([*DEFAULT_ADDONS, *addons])}"] if addons else []),
                # The release's NetworkPolicies do nothing where nothing enforces them.
                *(["--enable-dataplane-v2"] if need.network_policies else []),
                f"--workload-pool={pool}",
                "--workload-metadata=GKE_METADATA",
                # Image streaming (GKE's "Use Image streaming to pull container images"): the
                # launcher's image (Artifact Registry) starts before it is all pulled, on every
                # pool that does not turn it off; a TPU host's pod starts minutes sooner.
                "--enable-image-streaming",
                f"--machine-type={SYSTEM_MACHINE}",
                "--num-nodes=1",
                # GKE's default channel, said: new versions reach it after the rapid channel.
                f"--release-channel={CHANNEL}",
                *([f"--node-locations={target.system_zone}"] if target.node_zone else []),
                f"--labels={CREATED_BY}",
            ),
            done_if=Check(describe),
        )
    ]
    # Checked before anything of an existing cluster changes.
    if least:
        version, needed_by = least
        steps.append(
            Step(
                f"the cluster runs GKE {version} or later ({needed_by} need it)",
                [],
                done_if=Check(
                    [*describe, "--format=value(currentMasterVersion)"], at_least=version
                ),
                required=True,
                mismatch_fix=f"upgrade it (`gcloud container clusters upgrade {target.cluster} "
                f"{' '.join(location_flags(target))} --master --cluster-version={version}` or "
                "later, then its node pools), or name a newer cluster",
            )
        )
    if need.network_policies:
        update = " ".join(
            gcloud("container", "clusters", "update", target.cluster, *location_flags(target))
        )
        steps.append(
            Step(
                "the cluster enforces NetworkPolicy (Dataplane V2, or network policy "
                "enforcement): else the release's NetworkPolicies admit everything",
                [],
                done_if=_cluster_filter(target, ENFORCES_NETWORK_POLICY),
                required=True,
                mismatch_fix=f"turn enforcement on (`{update} --update-addons=NetworkPolicy="
                f"ENABLED`, then `{update} --enable-network-policy`: GKE recreates every node "
                "pool's nodes), or go without the policies, said: --set "
                "networkPolicy.enabled=false",
            )
        )
    if addons:
        why = {"RayOperator": "KubeRay and its TPU webhook", "GcsFuseCsiDriver": "the bucket"}
        condition = " AND ".join(
            f"addonsConfig.{a[0].lower() + a[1:]}Config.enabled=true" for a in addons
        )
        steps.append(
            Step(
                "add-ons of an existing cluster: " + ", ".join(f"{a} ({why[a]})" for a in addons),
                gcloud(
                    "container",
                    "clusters",
                    "update",
                    target.cluster,
                    *location_flags(target),
                    "--update-addons=" + ",".join(f"{a}=ENABLED" for a in addons),
                ),
                done_if=_cluster_filter(target, condition),
            )
        )
    steps += [
        Step(
            "Workload Identity on an existing cluster (pods act as Google identities, no keys)",
            gcloud(
                "container",
                "clusters",
                "update",
                target.cluster,
                *location_flags(target),
                f"--workload-pool={pool}",
            ),
            done_if=_cluster_filter(target, f"workloadIdentityConfig.workloadPool={pool}"),
        ),
        # After Workload Identity: gcloud moves a pool to the metadata server only on a cluster
        # that has it ("can only be enabled if Workload Identity is enabled at the cluster
        # level"), so the check's fix, and the migration, work only from here.
        metadata_migration(target) if target.migrate_metadata else metadata_check(target),
        Step(
            "kubectl's credentials for the cluster",
            gcloud(
                "container", "clusters", "get-credentials", target.cluster, *location_flags(target)
            ),
        ),
    ]
    return steps


def bucket_steps(need: ReleaseNeeds, target: GkeTarget) -> list[Step]:
    if not need.bucket:
        return []
    steps = [
        Step(
            f"checkpoint bucket gs://{need.bucket} (hierarchical namespace: atomic folder renames)",
            gcloud(
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
            done_if=Check(gcloud("storage", "buckets", "describe", f"gs://{need.bucket}")),
        )
    ]
    for identity in need.identities:
        steps += _grant_steps(identity, need, target)
    return steps


def _grant_steps(identity: Identity, need: ReleaseNeeds, target: GkeTarget) -> list[Step]:
    """The bucket for one part's identity: objectUser where its pods write (training's
    checkpoints, Saxml's state), objectViewer where they only read (serving), so a compromised
    model server cannot rewrite checkpoints; and objectUser under the prefixes a reader still
    writes (vLLM's compile cache) only."""
    role, may = (
        ("roles/storage.objectUser", "read and write")
        if identity.writes
        else ("roles/storage.objectViewer", "read")
    )
    account = identity.account
    gsa = identity.gcp_service_account
    member = (
        f"serviceAccount:{gsa}"
        if gsa
        else "principal://iam.googleapis.com/projects/${PROJECT_NUMBER}/"
        f"locations/global/workloadIdentityPools/{target.project}.svc.id.goog/"
        f"subject/ns/{need.namespace}/sa/{account}"
    )
    who = gsa or f"the release's service account {account}"

    def bind(role: str, condition: str = "None") -> list[str]:
        bucket = f"gs://{need.bucket}"
        group = ("storage", "buckets")
        return iam_binding(group, bucket, member=member, role=role, condition=condition)

    steps = [Step(f"{who} may {may} gs://{need.bucket}", bind(role))]
    for prefix in identity.write_prefixes:
        # Cloud Storage IAM conditions on object names (the bucket has uniform bucket-level
        # access): objectUser on objects under the prefix only; listing stays the viewer's.
        condition = (
            "expression=resource.name.startsWith("
            f'"projects/_/buckets/{need.bucket}/objects/{prefix}"),'
            f"title=tpu-launcher {prefix.rstrip('/')}"
        )
        steps.append(
            Step(
                f"{who} may write gs://{need.bucket}/{prefix} only (its compile cache)",
                bind("roles/storage.objectUser", condition),
            )
        )
    if gsa:
        return [
            *steps,
            Step(
                f"the release's service account {account} may act as it",
                iam_binding(
                    ("iam", "service-accounts"),
                    gsa,
                    f"--project={target.project}",
                    member=f"serviceAccount:{target.project}.svc.id.goog"
                    f"[{need.namespace}/{account}]",
                    role="roles/iam.workloadIdentityUser",
                ),
            ),
        ]
    return steps


def up_plan(
    need: ReleaseNeeds,
    target: GkeTarget,
    release: str,
    source: Path | None,
    chart: Path,
    helm: str = "helm",
) -> Plan:
    """In the order they can run, what bills most last: the zone checked (before anything),
    the APIs, the cluster (its version and pools checked), credentials, CPU pool, registry and
    who may use it, image and chart, bucket and access, then the TPU pools, so no TPU host bills
    while the image builds, or at all when a step before them fails."""
    target.require_standard_location()
    for pool in need.pools:
        require_offered(pool, target)
    builds = source is not None
    steps = api_steps(apis_needed(need, target, builds), target)
    if parent_zone(target.zone):
        steps.append(ai_zone_visible(target))
    steps += cluster_steps(need, target)
    if cpu := cpu_pool(release, need.cpu_pods):
        steps.append(cpu_pool_step(cpu, target))
    access = image_access_steps(need, target, builds)
    later = node_account_steps(target) + image_steps(need, target, source, chart, helm, access)
    later += bucket_steps(need, target)
    if any("${PROJECT_NUMBER}" in a for s in later for a in s.argv):
        steps.append(project_number_step(target))
    steps += later
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
    if need.jobset:
        notes.append(
            "Saxml's model servers are a JobSet: the JobSet controller (v0.12 or newer) must run "
            "in the cluster (kubernetes-sigs/jobset releases)."
        )
    if classes := sorted({p.compute_class for p in need.pools if p.compute_class}):
        notes.append(
            f"The TPU pools fall back through ComputeClass {', '.join(classes)}: apply it "
            "before `helm install` (`tpu-launcher gke compute-class` with these values "
            "| kubectl apply -f -); without it the pods select a class no node joins."
        )
    elif any(p.fallback for p in need.pools):
        notes.append(
            "The TPU pools fall back through the Kueue queue's flavors, in the capacity list's "
            "order: `tpu-launcher gke queue` with these values prints them (| kubectl apply -f -)."
        )
    if need.leader_worker_set:
        notes.append(
            "vLLM runs as a LeaderWorkerSet: the LWS controller (v0.7 or newer) must run in the "
            "cluster (kubernetes-sigs/lws releases; GKE installs none)."
        )
    return Plan(steps, notes)


def down_plan(
    need: ReleaseNeeds, target: GkeTarget, release: str, namespace: str, helm: str = "helm"
) -> Plan:
    """What `gke up` made, removed: the release, its node pools, the cluster (only one `gke up`
    created, with no pools of others left), then what the region's clusters share (the image
    repository `gke up` created, Ironwood's workload policies) once no cluster of the project
    is left in the region. The bucket stays."""
    where = [f"--cluster={target.cluster}", *location_flags(target)]
    # The context get-credentials writes: never the release of another cluster.
    helm_where = [f"--namespace={namespace}", f"--kube-context={target.kube_context}"]
    cluster_gone = Check(
        gcloud("container", "clusters", "describe", target.cluster, *location_flags(target)),
        negate=True,
    )
    steps = [
        Step(
            "(first, kubectl's credentials for the cluster, to reach the release: not deleted)",
            gcloud(
                "container", "clusters", "get-credentials", target.cluster, *location_flags(target)
            ),
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
        describe = gcloud("container", "node-pools", "describe", name, *where)
        steps.append(
            Step(
                f"node pool {name}",
                gcloud("container", "node-pools", "delete", name, *where, "--quiet"),
                done_if=Check(describe, negate=True),
            )
        )
    # Node pools of others (another release's, one made by hand) hold the cluster: only GKE's
    # own default pool may be left.
    others = gcloud(
        "container", "node-pools", "list", *where,
        "--filter=NOT name=default-pool", "--format=value(name)",
    )  # fmt: skip
    held = Check(others, output="", negate=True)
    steps.append(
        Step(
            f"cluster {target.cluster} (if gke up made it, and nothing else is in it)",
            gcloud(
                "container",
                "clusters",
                "delete",
                target.cluster,
                *location_flags(target),
                "--quiet",
            ),
            done_if=replace(_cluster_filter(target, f"resourceLabels.{CREATED_BY}"), negate=True),
            keep_if=held,
            kept_because="these node pools of others are in it (`gke down` of their release "
            "deletes them; then run it again)",
        )
    )
    # What the region's clusters share, after the cluster: kept while any cluster of the
    # project is in the region (this one, kept above, or another), as GKE lists them; another
    # cluster's pods may pull from the repository, its pools may be placed by the policy.
    in_region = Check(_clusters_in_region(target), output="", negate=True)
    for policy in filter(None, map(workload_policy, need.pools)):
        delete = " ".join(resource_policies("delete", policy, "--quiet", target=target))
        steps.append(
            Step(
                f"workload policy {policy} (when no cluster is left in {target.region})",
                resource_policies("delete", policy, "--quiet", target=target),
                done_if=Check(resource_policies("describe", policy, target=target), negate=True),
                keep_if=in_region,
                kept_because=f"clusters in {target.region} may place pools with it (`{delete}` "
                "deletes it once none does)",
            )
        )
    # Whatever this release pulls: the last release's gke down takes what an earlier one kept.
    if not target.registry:
        repo = [REPOSITORY, f"--location={target.region}", f"--project={target.project}"]
        delete = " ".join(gcloud("artifacts", "repositories", "delete", *repo))
        steps.append(
            Step(
                f"Artifact Registry repository {REPOSITORY} and its images (if gke up made it, "
                f"when no cluster is left in {target.region})",
                gcloud("artifacts", "repositories", "delete", *repo, "--quiet"),
                done_if=Check(_repo_ours(target), output=REPOSITORY, negate=True),
                keep_if=in_region,
                kept_because=f"the pods of clusters in {target.region} may pull from it "
                f"(`{delete}` deletes it and its images once none does)",
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
    if need.launcher_image and not target.registry:
        email, staging = build_account(target.project), build_staging(target.project)
        stays.append(
            f"the image's build account {email}, if gke up made it, stays with its grants "
            f"(push to the repository, logs, read {staging}): `gcloud iam service-accounts "
            f"delete {email} --project={target.project}` deletes it and them; {staging}, "
            "where builds stage their source, stays too (`gcloud storage rm -r` deletes it)"
        )
    return Plan(steps, ["What `gke up` made for this release, deleted."], stays)


def _clusters_in_region(target: GkeTarget) -> list[str]:
    """Lists the project's clusters in the target's region, zonal and regional (every location
    asked: GKE's `locations/-`)."""
    return gcloud(
        "container",
        "clusters",
        "list",
        f"--project={target.project}",
        f"--filter=location~^{target.region}(-[a-z])?$",
        "--format=value(name,location)",
    )


def _repo_ours(target: GkeTarget) -> list[str]:
    """Prints the repository's short name when it exists and carries our label."""
    return gcloud(
        "artifacts",
        "repositories",
        "list",
        f"--location={target.region}",
        f"--project={target.project}",
        f"--filter=name~/{REPOSITORY}$ AND labels.{CREATED_BY}",
        "--format=value(name.basename())",
    )
