"""Where each rule the GKE road relies on is written: every gcloud command and flag `gke plan|up|
down` runs, and every Kueue field `gke queue` prints, with the page it comes from and the words
there it rests on. A test renders every plan and queue and lists any command, flag or field
without one here; docs/gke.md says which of them only a real project shows.
"""

from __future__ import annotations

from dataclasses import dataclass

REFERENCE = "cloud.google.com/sdk/gcloud/reference/"


@dataclass(frozen=True)
class Source:
    page: str  # the document: its title, or the gcloud reference page's address
    quote: str  # the words there the rule rests on


def _ref(command: str, quote: str) -> Source:
    return Source(REFERENCE + command.replace(" ", "/"), quote)


# Each gcloud command, by its words after `gcloud` (its reference page's first line).
COMMANDS = {
    c: _ref(c, q)
    for c, q in (
        ("services enable", "Enables a service for consumption for a project"),
        ("services list", "List services for a project"),
        ("projects describe", "Show metadata for a project"),
        ("projects add-iam-policy-binding", "Add IAM policy binding for a project"),
        ("container get-server-config", "Get Kubernetes Engine server config"),
        ("container clusters create", "Create a cluster for running containers"),
        ("container clusters describe", "Describe an existing cluster for running containers"),
        ("container clusters list", "List existing clusters for running containers"),
        ("container clusters update", "Update cluster settings for an existing container cluster"),
        ("container clusters get-credentials", "Fetch credentials for a running cluster"),
        ("container clusters delete", "Delete an existing cluster for running containers"),
        ("container node-pools create", "Create a node pool in a running cluster"),
        ("container node-pools describe", "Describe an existing node pool for a cluster"),
        ("container node-pools list", "List existing node pools for a cluster"),
        ("container node-pools update", "Updates a node pool in a running cluster"),
        ("container node-pools delete", "Delete an existing node pool in a running cluster"),
        (
            "compute resource-policies create workload-policy",
            "Create a Compute Engine workload resource policy",
        ),
        ("compute resource-policies describe", "Describe a Compute Engine resource policy"),
        ("compute zones describe", "Describe a Compute Engine zone"),
        ("compute resource-policies delete", "Delete Compute Engine resource policies"),
        ("artifacts repositories create", "Create an Artifact Registry repository"),
        ("artifacts repositories describe", "Describe an Artifact Registry repository"),
        ("artifacts repositories list", "List repositories"),
        ("artifacts repositories delete", "Delete an Artifact Registry repository"),
        (
            "artifacts repositories add-iam-policy-binding",
            "Add an IAM policy binding to the IAM policy of an Artifact Registry repository",
        ),
        ("artifacts docker images describe", "Describe an Artifact Registry container image"),
        ("builds submit", "Submit a build using Cloud Build"),
        ("auth configure-docker", "Register gcloud as a Docker credential helper"),
        ("storage buckets create", "Create buckets for storing objects"),
        ("storage buckets describe", "Describes a bucket"),
        ("storage buckets add-iam-policy-binding", "Add an IAM policy binding to a bucket"),
        ("iam service-accounts create", "Create a service account for a project"),
        (
            "iam service-accounts describe",
            "Show metadata for a service account from a project",
        ),
        (
            "iam service-accounts add-iam-policy-binding",
            "Add an IAM policy binding to an IAM service account",
        ),
    )
}

_POOLS = REFERENCE + "container/node-pools/create"
_CLUSTERS = REFERENCE + "container/clusters/create"
_TPU_STANDARD = "GKE: Deploy TPU workloads in GKE Standard"

# Each flag, by name. Flags several commands share (--project, --format) are gcloud's own.
FLAGS = {
    "--project": Source(REFERENCE + "topic/configurations", "The Google Cloud project ID"),
    "--location": Source(
        _CLUSTERS, "Compute zone or region (e.g. us-central1-a or us-central1) for the cluster"
    ),
    "--region": Source(REFERENCE + "compute/resource-policies", "Region of the resource policy"),
    "--cluster": Source(_POOLS, "The cluster to add the node pool to"),
    "--format": Source(REFERENCE + "topic/formats", "value(...): the field values, no labels"),
    "--filter": Source(REFERENCE + "topic/filters", "key=value, key~regex, key:word, NOT, AND"),
    "--flatten": Source(
        REFERENCE + "topic/flatten",
        "Flatten name[] output resource slices in KEY into separate records for each item",
    ),
    "--quiet": Source(REFERENCE, "Disable all interactive prompts"),
    "--enabled": Source(
        COMMANDS["services list"].page,
        "Return the services which the consumer project has enabled",
    ),
    "--addons": Source(
        REFERENCE + "container/clusters/create",
        "Addons specified by this flag will be enabled. The others will be disabled. Default "
        "addons: HttpLoadBalancing, HorizontalPodAutoscaling (and GKE's Ray/TPU Trillium "
        "tutorial: --addons=RayOperator,GcsFuseCsiDriver)",
    ),
    "--enable-dataplane-v2": Source(
        "GKE: About Dataplane V2",
        "GKE Dataplane V2 comes with built-in network policy enforcement ... you can only "
        "enable it when you create a new cluster",
    ),
    "--enable-image-streaming": Source(
        "GKE: Use Image streaming to pull container images",
        "Image streaming lets workloads start without waiting for the entire image to download "
        "... gcloud container clusters create CLUSTER_NAME --zone=COMPUTE_ZONE "
        '--image-type="COS_CONTAINERD" --enable-image-streaming',
    ),
    "--update-addons": Source(
        REFERENCE + "container/clusters/update", "Cluster addons to enable or disable"
    ),
    "--workload-pool": Source(
        "GKE: Use Workload Identity Federation for GKE",
        "--workload-pool=PROJECT_ID.svc.id.goog",
    ),
    "--workload-metadata": Source(
        "GKE: Use Workload Identity Federation for GKE",
        "--workload-metadata=GKE_METADATA: node pools use the GKE metadata server; existing "
        "node pools are migrated with node-pools update",
    ),
    "--machine-type": Source(_TPU_STANDARD, "the TPU machine type (ct6e-standard-4t, ...)"),
    "--num-nodes": Source(
        _TPU_STANDARD,
        "a multi-host slice's node count is the chips in its topology divided by the chips of "
        "one VM",
    ),
    "--node-locations": Source(_POOLS, "The set of zones in which the node pool's nodes appear"),
    "--release-channel": Source(
        "GKE: About release channels", "regular: the default for new clusters"
    ),
    "--labels": Source(_CLUSTERS, "Labels to apply to the Google Cloud resources"),
    "--tpu-topology": Source(
        _TPU_STANDARD, "--tpu-topology: the physical topology of a multi-host TPU slice"
    ),
    "--placement-type": Source(
        _TPU_STANDARD, "--placement-type=COMPACT (xpk's node pools: a slice in one ICI domain)"
    ),
    "--threads-per-core": Source(
        "GKE: Train an LLM using JAX, Ray Train, and TPU Trillium",
        "node-pools create v6e-16 ... --threads-per-core=1",
    ),
    "--placement-policy": Source(
        "GKE: About Ironwood (TPU7x) in GKE",
        "create a workload policy, then apply it with the --placement-policy flag; it replaces "
        "the --tpu-topology flag used by other TPU versions",
    ),
    "--type": Source(
        "GKE: About Ironwood (TPU7x) in GKE", "--type=HIGH_THROUGHPUT workload policy"
    ),
    "--accelerator-topology": Source(
        "GKE: About Ironwood (TPU7x) in GKE", "--accelerator-topology: the slice's topology"
    ),
    "--spot": Source("GKE: Use Spot VMs", "--spot: create a node pool with Spot VMs"),
    "--system-config-from-file": Source(
        "GKE: Spot VMs",
        "You can extend the graceful termination period to up to 120 seconds ... customize "
        "the node system configuration (kubeletConfig) for a Standard node pool",
    ),
    "--reservation-affinity": Source(
        "GKE: Consuming reserved zonal resources", "--reservation-affinity=specific"
    ),
    "--reservation": Source(
        "GKE: Consuming reserved zonal resources", "--reservation=RESERVATION_NAME"
    ),
    "--flex-start": Source(
        "GKE: Run a small batch workload with TPUs and flex-start VMs",
        "--flex-start --enable-autoscaling --num-nodes=0 --total-min-nodes=0 "
        "--total-max-nodes=... --location-policy=ANY --reservation-affinity=none "
        "--no-enable-autorepair",
    ),
    "--enable-queued-provisioning": Source(
        "GKE: Run a large-scale workload with flex-start with queued provisioning",
        "To use flex-start with queued provisioning, you have to add the --flex-start and "
        "--enable-queued-provisioning flags",
    ),
    "--node-labels": Source(
        "Google's cluster-toolkit: dws-flex-start-queued-provisioning/gke-tpu-v6e",
        "cloud.google.com/gke-queued: true ... Mandatory for Queued Provisioning (GKE taints "
        "the nodes; the label the pods select is the pool's to give)",
    ),
    "--enable-autoscaling": Source(
        "GKE: About cluster autoscaling",
        "a multi-host TPU slice node pool scales atomically: all of its nodes, or none",
    ),
    "--total-min-nodes": Source(_POOLS, "Minimum number of nodes in the node pool (in total)"),
    "--total-max-nodes": Source(_POOLS, "Maximum number of nodes in the node pool (in total)"),
    "--location-policy": Source(_POOLS, "ANY: the autoscaler picks a zone with capacity"),
    "--no-enable-autorepair": Source(
        "GKE: Run a small batch workload with TPUs and flex-start VMs", "--no-enable-autorepair"
    ),
    "--repository-format": Source(
        COMMANDS["artifacts repositories create"].page, "--repository-format=docker"
    ),
    "--config": Source(COMMANDS["builds submit"].page, "The YAML or JSON file for the build"),
    "--substitutions": Source(
        COMMANDS["builds submit"].page, "Parameters to be substituted in the build specification"
    ),
    "--service-account": Source(
        COMMANDS["builds submit"].page,
        "The service account to use with this build (Cloud Build: Run builds with a "
        "user-managed service account)",
    ),
    "--gcs-source-staging-dir": Source(
        COMMANDS["builds submit"].page,
        "A directory in Google Cloud Storage to copy the source used for staging the build",
    ),
    "--display-name": Source(
        COMMANDS["iam service-accounts create"].page,
        "A textual name to display for the account",
    ),
    "--uniform-bucket-level-access": Source(
        COMMANDS["storage buckets create"].page, "Turns on uniform bucket-level access"
    ),
    "--enable-hierarchical-namespace": Source(
        "Cloud Storage: Create buckets with hierarchical namespace enabled",
        "atomic folder renames (what a checkpoint's commit needs)",
    ),
    "--member": Source(
        "IAM: Principal identifiers",
        "serviceAccount:EMAIL; principal://iam.googleapis.com/projects/NUMBER/locations/global/"
        "workloadIdentityPools/PROJECT.svc.id.goog/subject/ns/NS/sa/KSA",
    ),
    "--role": Source(
        "IAM: roles", "storage.objectUser, storage.objectViewer, artifactregistry.reader, ..."
    ),
    "--condition": Source(
        COMMANDS["projects add-iam-policy-binding"].page + "; Cloud Storage: IAM Conditions",
        "None: a binding without a condition, asked for where the policy has conditions; "
        "expression=EXPR,title=TITLE: a conditional binding; Cloud Storage grants on objects "
        'whose name starts with a prefix: resource.name.startsWith("projects/_/buckets/'
        'BUCKET/objects/PREFIX") (the bucket has uniform bucket-level access)',
    ),
}

_KUEUE = "Kueue: Concepts (kueue.sigs.k8s.io/docs/concepts/)"
_GKE_QUEUED = "GKE: Run a large-scale workload with flex-start with queued provisioning"

# Each field of the Kueue objects `gke queue` prints, as Kind.spec-field.
KUEUE_FIELDS = {
    "ResourceFlavor.nodeLabels": Source(
        _KUEUE + " ResourceFlavor", "nodeLabels: the labels of the nodes this flavor stands for"
    ),
    "ResourceFlavor.tolerations": Source(
        _KUEUE + " ResourceFlavor", "tolerations added to the pods admitted with this flavor"
    ),
    "ClusterQueue.namespaceSelector": Source(
        _KUEUE + " ClusterQueue", "namespaceSelector: which namespaces may submit to it"
    ),
    "ClusterQueue.queueingStrategy": Source(
        _KUEUE + " ClusterQueue", "BestEffortFIFO: an inadmissible workload does not block"
    ),
    "ClusterQueue.preemption": Source(
        _KUEUE + " ClusterQueue", "withinClusterQueue: LowerPriority"
    ),
    "ClusterQueue.resourceGroups": Source(
        _KUEUE + " ClusterQueue", "coveredResources and flavors with their nominalQuota"
    ),
    "ClusterQueue.admissionChecksStrategy": Source(
        _KUEUE + " AdmissionCheck",
        "admissionChecks (onFlavors: only for those flavors): a workload is admitted once every "
        "check is Ready; v1beta2 has no ClusterQueue.admissionChecks",
    ),
    "ProvisioningRequestConfig.provisioningClassName": Source(
        _GKE_QUEUED, "provisioningClassName: queued-provisioning.gke.io"
    ),
    "ProvisioningRequestConfig.managedResources": Source(
        _GKE_QUEUED, "managedResources: - google.com/tpu"
    ),
    "AdmissionCheck.controllerName": Source(
        _GKE_QUEUED, "controllerName: kueue.x-k8s.io/provisioning-request"
    ),
    "AdmissionCheck.parameters": Source(
        _GKE_QUEUED, "parameters: the ProvisioningRequestConfig (apiGroup kueue.x-k8s.io)"
    ),
    "LocalQueue.clusterQueue": Source(_KUEUE + " LocalQueue", "clusterQueue: the queue it feeds"),
}


def command_of(argv: list[str]) -> str | None:
    """The command words of a gcloud argv that have a source (the longest that match)."""
    words = [w for w in argv[1:] if not w.startswith("-")]
    for n in range(len(words), 0, -1):
        if " ".join(words[:n]) in COMMANDS:
            return " ".join(words[:n])
    return None


def unsourced(argv: list[str]) -> list[str]:
    """What of a gcloud argv has no source here: its command, or any of its flags."""
    missing = [] if command_of(argv) else [" ".join(argv[:4])]
    flags = [w.partition("=")[0] for w in argv if w.startswith("--")]
    return missing + [f for f in flags if f not in FLAGS]
