"""Where a release goes on Google Cloud: project, cluster, location, bucket, and the Artifact
Registry repository its launcher image lives in. Read once from flags, else from the environment
variables the GKE tutorials export (PROJECT_ID, CLUSTER_NAME, LOCATION, BUCKET), else (project,
location) from gcloud's own configuration, so `gke plan`, `gke up`, `image`, `install` and
`gke down` all name the same things."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from launcher.core.errors import UsageError
from launcher.core.gcs import parse_bucket
from launcher.core.tpu.capacity import CAPACITIES, RESERVATION_ITEM
from launcher.core.tpu.table import AI_ZONES_SOURCE, parent_zone, region_of_zone
from launcher.core.values_file import TPU_BLOCKS

# The Artifact Registry repository `gke up` creates; the image is <repo>/launcher in it.
REPOSITORY = "tpu-stack"
IMAGE_NAME = "launcher"
# Resource label on what `gke up` creates itself (cluster, repository): `gke down` deletes only
# what carries it, never a cluster or repository that was there before.
CREATED_BY = "created-by=tpu-launcher"

_ENV = {
    "project": "PROJECT_ID",
    "cluster": "CLUSTER_NAME",
    "location": "LOCATION",
    "node_zone": "NODE_ZONE",
    "bucket": "BUCKET",
}


# What falls back to the user's gcloud configuration (`gcloud config set project|compute/zone`),
# as gcloud's own commands default them, when neither a flag nor the tutorial's variable says.
_GCLOUD_CONFIG = {"project": "project", "location": "compute/zone"}


def gcloud_config(prop: str) -> str | None:
    """`gcloud config get-value PROP`, or None when gcloud is not here or the value unset."""
    if shutil.which("gcloud") is None:
        return None
    proc = subprocess.run(
        ["gcloud", "config", "get-value", prop], capture_output=True, text=True, check=False
    )
    value = proc.stdout.strip()
    return value if proc.returncode == 0 and value and value != "(unset)" else None


def is_zone(location: str) -> bool:
    return not location.startswith("${") and region_of_zone(location) is not None


def region(location: str) -> str:
    """us-east5-b -> us-east5, us-central1-ai1a -> us-central1 (the TPU table's zones); a region
    stays as it is; a placeholder becomes ${REGION}."""
    if location.startswith("${"):
        return "${REGION}"
    return region_of_zone(location) or location


@dataclass(frozen=True)
class GkeTarget:
    """Where the release goes; an unset field stays a shell variable in a printed plan."""

    project: str = "${PROJECT_ID}"
    cluster: str = "${CLUSTER_NAME}"
    location: str = "${LOCATION}"  # the cluster's region or zone
    node_zone: str | None = None  # the zone of the TPU node pools (default: a zonal location)
    bucket: str | None = None  # default: the values' global.gcsfuse.bucketName
    bucket_location: str | None = None  # default: the region of `location`
    capacity: str | None = None  # how the TPUs are obtained (default: the values')
    reservation: str | None = None
    registry: str | None = None  # an image registry path of your own instead of ours
    image_tag: str | None = None  # the launcher image's tag (default: the chart's appVersion)
    allow_zone: str | None = None  # a TPU zone the TPU table does not list yet (--allow-zone)
    migrate_metadata: bool = False  # move pools without the GKE metadata server to it

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> GkeTarget:
        given = {k: getattr(ns, k, None) or os.environ.get(env) for k, env in _ENV.items()}
        for key, prop in _GCLOUD_CONFIG.items():  # as gcloud itself would default them
            given[key] = given[key] or gcloud_config(prop)
        if given["bucket"]:  # a whole bucket: the release mounts it on every host
            field = "--bucket" if getattr(ns, "bucket", None) else _ENV["bucket"]
            given["bucket"] = parse_bucket(given["bucket"], field, prefix=False).name
        given["bucket_location"] = getattr(ns, "bucket_location", None)
        given["reservation"] = getattr(ns, "reservation", None)
        given["registry"] = getattr(ns, "registry", None)
        given["allow_zone"] = getattr(ns, "allow_zone", None)
        given["capacity"] = getattr(ns, "capacity", None) or (
            "reservation" if given["reservation"] else None
        )
        migrate = bool(getattr(ns, "migrate_node_metadata", False))
        return cls(**{k: v for k, v in given.items() if v}, migrate_metadata=migrate)

    @property
    def region(self) -> str:
        return region(self.location)

    @property
    def kube_context(self) -> str:
        """The kubeconfig context `gcloud container clusters get-credentials` writes."""
        return f"gke_{self.project}_{self.location}_{self.cluster}"

    @property
    def zone(self) -> str:
        """TPU capacity is zonal: a regional cluster needs the zone of its TPU pools."""
        if self.node_zone:
            return self.node_zone
        return self.location if is_zone(self.location) else "${NODE_ZONE}"

    @property
    def system_zone(self) -> str:
        """Where the cluster's own nodes and the release's CPU pool go: the TPU zone, or for an
        AI zone its parent zone (Compute Engine's "AI zones" advises standard zones for what is
        not ML: not every service is local to an AI zone)."""
        return parent_zone(self.zone) or self.zone

    def require_standard_location(self) -> None:
        """A cluster's location in an AI zone would put its control plane and CPU pool there;
        the TPU pools go there through --node-zone instead."""
        if parent := parent_zone(self.location):
            raise UsageError(
                "--location",
                f"{self.location} is an AI zone: the cluster's control plane and its CPU pool "
                f"would run there, where {AI_ZONES_SOURCE} advises standard zones for what is "
                "not ML",
                f"--location {region(self.location)} (or {parent}, its parent zone) with "
                f"--node-zone {self.location}: the TPU pools go to the AI zone, the rest to "
                f"{parent}",
            )

    @property
    def image_repository(self) -> tuple[str, str]:
        """(registry host, repository path) of the launcher image: the Artifact Registry
        repository `gke up` creates, unless --registry names another (host/path)."""
        if self.registry:
            host, _, path = self.registry.rstrip("/").partition("/")
            return host, f"{path}/{IMAGE_NAME}" if path else IMAGE_NAME
        return f"{self.region}-docker.pkg.dev", f"{self.project}/{REPOSITORY}/{IMAGE_NAME}"

    def require_image_name(self) -> None:
        """Refuses a target whose image name still has placeholders: `image` would push, and
        `install` would pull, an image no one can name."""
        if "${" in "".join(self.image_repository):
            raise UsageError(
                "--project",
                "no project or location: the release's image is named after them "
                "(<region>-docker.pkg.dev/<project>/tpu-stack/launcher, what gke up pushes)",
                "pass --project and --location (or export PROJECT_ID and LOCATION), or "
                "--registry host/path for a registry of your own",
            )

    def helm_sets(self) -> list[str]:
        """The chart values this target decides: the image the release pulls and the bucket
        it mounts. `gke plan`, `image` and `install` render with the same ones."""
        host, repository = self.image_repository
        sets = [f"ray.image.registry={host}", f"ray.image.repository={repository}"]
        if self.image_tag:
            sets.append(f"ray.image.tag={self.image_tag}")
        if self.bucket:
            sets.append(f"global.gcsfuse.bucketName={self.bucket}")
        words = self.capacity.split(",") if self.capacity else []  # a fallback: Helm's {a,b}
        reservation = self.reservation
        if len(words) == 1 and (named := RESERVATION_ITEM.fullmatch(words[0])):
            words, reservation = ["reservation"], named[1]  # one item: the values' own form
        for block in TPU_BLOCKS.values() if words else ():  # every slice group alike
            value = words[0] if len(words) == 1 else "{" + ",".join(words) + "}"
            sets.append(f"{'.'.join(block)}.capacity={value}")
            if reservation:
                sets.append(f"{'.'.join(block)}.reservation={reservation}")
        return sets

    def unset(self) -> list[str]:
        """The environment variables still needed (the placeholders left)."""
        return sorted(
            {
                m
                for v in (self.project, self.cluster, self.location, self.zone)
                for m in re.findall(r"\$\{(\w+)\}", v)
            }
        )


def _capacity_words(text: str) -> str:
    """--capacity's value: known capacities, comma-separated (the chart checks the rest)."""
    for word in text.split(","):
        if word not in CAPACITIES and not RESERVATION_ITEM.fullmatch(word):
            raise argparse.ArgumentTypeError(
                f"unknown capacity {word!r}: one of {', '.join(CAPACITIES)} or reservation:NAME"
            )
    return text


def add_target_options(p: argparse.ArgumentParser, *, pools: bool = True) -> None:
    """The target's flags; each defaults to the environment variable the tutorials export."""
    p.add_argument("--project", help="Google Cloud project [env PROJECT_ID]")
    p.add_argument("--cluster", help="GKE cluster name [env CLUSTER_NAME]")
    p.add_argument(
        "--location", help="the cluster's region or zone, e.g. us-east5-b [env LOCATION]"
    )
    p.add_argument(
        "--bucket",
        metavar="BUCKET",
        help="the checkpoint bucket the release mounts, BUCKET or gs://BUCKET (default: the "
        "values' global.gcsfuse.bucketName) [env BUCKET]",
    )
    p.add_argument(
        "--registry",
        help="push and pull the launcher image here (host/path) instead of the Artifact "
        "Registry repository gke up creates (<region>-docker.pkg.dev/<project>/tpu-stack)",
    )
    # The pods ask for the capacity the pools are made of: plan, up and install take it alike.
    p.add_argument(
        "--capacity",
        type=_capacity_words,
        metavar="CAPACITY[,CAPACITY...]",
        help="how the TPUs are obtained, for every slice of the release: "
        f"{', '.join(CAPACITIES)}, or reservation:NAME; several, comma-separated, are a "
        "fallback tried in order (reservation:NAME,on-demand,spot) (default: the values' "
        "ray.worker.tpu.capacity, on-demand)",
    )
    p.add_argument(
        "--reservation", help="consume this specific reservation (--capacity reservation)"
    )
    if pools:
        p.add_argument(
            "--node-zone", help="zone of the TPU node pools (default: a zonal --location)"
        )
        p.add_argument("--bucket-location", help="default: the region of --location")
        p.add_argument(
            "--allow-zone",
            metavar="ZONE",
            help="make TPU pools in ZONE though the TPU table does not list it for the slice's "
            "generation (a zone Cloud TPU has added since this version)",
        )
        p.add_argument(
            "--migrate-node-metadata",
            action="store_true",
            help="move the cluster's node pools that lack the GKE metadata server to it "
            "(Workload Identity; recreates their nodes, running pods included)",
        )
