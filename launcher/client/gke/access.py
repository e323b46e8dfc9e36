"""What an empty project needs before any of the release can be made, as gke plan steps: the
Google APIs the later steps call, enabled first, and the roles Google's own service accounts
need for the image: GKE's nodes pull it, Cloud Build pushes it. Each rule with its source.
"""

from __future__ import annotations

from launcher.client.gke.release import ReleaseNeeds
from launcher.client.gke.steps import Check, Step, gcloud, iam_binding
from launcher.client.gke.target import REPOSITORY, GkeTarget

# Service Usage's "Enabling and disabling services": a new project has none of these on, and a
# call to a disabled one fails ("... API has not been used in project N before or it is
# disabled. Enable it by visiting ..."). What uses each:
APIS = {
    "container.googleapis.com": "GKE: the cluster and its node pools",
    "compute.googleapis.com": "Compute Engine: the nodes' VMs, Ironwood's workload policies",
    "artifactregistry.googleapis.com": "Artifact Registry: the launcher image and the chart",
    "cloudbuild.googleapis.com": "Cloud Build: builds the launcher image, no local Docker",
    "storage.googleapis.com": "Cloud Storage: the checkpoint bucket",
    "iam.googleapis.com": "IAM: Google service accounts (the release's, the image build's)",
    # GKE's "Use Image streaming to pull container images": "Enable the Container File System
    # API" (the cluster is made with --enable-image-streaming).
    "containerfilesystem.googleapis.com": "Container File System: image streaming",
}

# The account GKE's nodes run as when their pool names none (GKE's "Use least privilege
# service accounts for your nodes": "By default, GKE nodes use the Compute Engine default
# service account"); it pulls the image. Artifact Registry's "Configure access control":
# pulling needs roles/artifactregistry.reader, which new organisations no longer give that
# account by default (iam.automaticIamGrantsForDefaultServiceAccounts drops its Editor grant).
NODE_ACCOUNT = "${PROJECT_NUMBER}-compute@developer.gserviceaccount.com"
PULL_ROLE = "roles/artifactregistry.reader"
# Cloud Build's "Run builds with a user-managed service account": the default build account
# "might have unnecessarily broad permissions", and in projects made since 2024 it is the
# Compute Engine default account every node runs as, which a grant for the build would widen.
# So the image is built by an account of its own, given what a build of it needs and no more:
# push to the repository (on it alone), write its logs to Cloud Logging (a build under such an
# account "must" store them in Cloud Logging or a bucket of the user's: cloudbuild.yaml's
# `logging: CLOUD_LOGGING_ONLY`), read its staged source (on the staging bucket alone).
BUILD_ACCOUNT_NAME = "tpu-launcher-build"
PUSH_ROLE = "roles/artifactregistry.writer"
LOG_ROLE = "roles/logging.logWriter"
SOURCE_ROLE = "roles/storage.objectViewer"


def build_account(project: str) -> str:
    return f"{BUILD_ACCOUNT_NAME}@{project}.iam.gserviceaccount.com"


def build_staging(project: str) -> str:
    """Where `gcloud builds submit` stages the source: its own default bucket
    (`--gcs-source-staging-dir`'s help: gs://[PROJECT_ID]_cloudbuild/source), named so the build
    account's read is granted on it alone."""
    return f"gs://{project}_cloudbuild"


# GKE's "Use least privilege IAM service accounts": a node's account needs the Kubernetes Engine
# Default Node Service Account role to write its logs and metrics, which organisations whose
# policy withholds the default account's Editor grant (iam.automaticIamGrantsForDefaultService
# Accounts) do not give it: granted here, as that page says.
NODE_ROLE = "roles/container.defaultNodeServiceAccount"


def apis_needed(need: ReleaseNeeds, target: GkeTarget, builds: bool) -> list[str]:
    apis = ["container.googleapis.com", "compute.googleapis.com"]
    apis.append("containerfilesystem.googleapis.com")  # the cluster streams its images
    if need.launcher_image and not target.registry:
        apis.append("artifactregistry.googleapis.com")
    if need.launcher_image and builds:
        apis.append("cloudbuild.googleapis.com")
    if need.bucket or (need.launcher_image and builds and not target.registry):
        apis.append("storage.googleapis.com")  # the bucket; the build's staged source
    if any(i.gcp_service_account for i in need.identities) or (
        need.launcher_image and builds and not target.registry
    ):
        apis.append("iam.googleapis.com")  # Google service accounts: named, or the build's
    return apis


def api_steps(apis: list[str], target: GkeTarget) -> list[Step]:
    """One step an API, skipped when `services list --enabled` shows it on (enabling needs the
    Service Usage Admin role, which a team that has them on may not hold)."""
    project = f"--project={target.project}"
    return [
        Step(
            f"API {api} ({APIS[api]})",
            gcloud("services", "enable", api, project),
            done_if=Check(
                gcloud(
                    "services",
                    "list",
                    "--enabled",
                    project,
                    f"--filter=config.name={api}",
                    "--format=value(config.name)",
                ),
                output=api,
            ),
        )
        for api in apis
    ]


def project_number_step(target: GkeTarget) -> Step:
    return Step(
        "the project's number (Workload Identity principals and the default accounts name it)",
        gcloud("projects", "describe", target.project, "--format=value(projectNumber)"),
        capture_as="PROJECT_NUMBER",
    )


def node_account_steps(target: GkeTarget) -> list[Step]:
    """The nodes' account may write their logs and metrics (NODE_ROLE). Idempotent: it runs
    again on a rerun, as every binding does."""
    return [
        Step(
            f"GKE's nodes (the Compute Engine default service account) may write their logs and "
            f"metrics ({NODE_ROLE})",
            iam_binding(
                ("projects",),
                target.project,
                member=f"serviceAccount:{NODE_ACCOUNT}",
                role=NODE_ROLE,
            ),
        )
    ]


def image_access_steps(need: ReleaseNeeds, target: GkeTarget, builds: bool) -> list[Step]:
    """The nodes may pull from the repository gke up makes; the build account may push to it.
    Bindings are idempotent: they run again on a rerun, as the bucket's do."""
    if not need.launcher_image or target.registry:
        return []  # a registry of your own: its access is yours to give
    project = f"--project={target.project}"
    repo = [REPOSITORY, f"--location={target.region}", project]
    steps = [
        Step(
            f"GKE's nodes (the Compute Engine default service account) may pull from {REPOSITORY}"
            f" ({PULL_ROLE})",
            iam_binding(
                ("artifacts", "repositories"),
                *repo,
                member=f"serviceAccount:{NODE_ACCOUNT}",
                role=PULL_ROLE,
            ),
        )
    ]
    if builds:
        email = build_account(target.project)
        member = f"serviceAccount:{email}"
        staging = build_staging(target.project)
        steps += [
            Step(
                f"the image's build account {email} (builds run as it, not as Cloud Build's "
                "default account, which may be the one every node runs as)",
                gcloud(
                    "iam",
                    "service-accounts",
                    "create",
                    BUILD_ACCOUNT_NAME,
                    project,
                    "--display-name=tpu-launcher image builds",
                ),
                done_if=Check(gcloud("iam", "service-accounts", "describe", email, project)),
            ),
            Step(
                f"it may push to {REPOSITORY} ({PUSH_ROLE}, on the repository alone)",
                iam_binding(("artifacts", "repositories"), *repo, member=member, role=PUSH_ROLE),
            ),
            Step(
                f"it may write its build logs to Cloud Logging ({LOG_ROLE})",
                iam_binding(("projects",), target.project, member=member, role=LOG_ROLE),
            ),
            Step(
                f"the builds' source staging bucket {staging} (gcloud builds submit's own)",
                gcloud(
                    "storage",
                    "buckets",
                    "create",
                    staging,
                    project,
                    f"--location={target.region}",
                    "--uniform-bucket-level-access",
                ),
                done_if=Check(gcloud("storage", "buckets", "describe", staging)),
            ),
            Step(
                f"it may read the staged source ({SOURCE_ROLE}, on {staging} alone)",
                iam_binding(("storage", "buckets"), staging, member=member, role=SOURCE_ROLE),
            ),
        ]
    return steps
