"""Before `gke up` changes anything: does the installed gcloud know what the plan uses that some
gclouds do not yet? An older gcloud refuses it only when its step runs, after the cluster and
its CPU pool bill. Asked of the installed gcloud itself (its own help, no call to Google), not
of a version table: gcloud's release notes are not something a plan can read.

What is checked (NEWER): the node shutdown fields of a Spot pool's system configuration. gcloud
528.0.0's loader refuses both ("unknown fields" in kubeletConfig), though GKE's API
(NodeKubeletConfig) has them; `gcloud container node-pools create --help` lists, under
--system-config-from-file, every kubelet field the installed gcloud takes."""

from __future__ import annotations

import re
import shutil

import yaml

from launcher.client.commands import run
from launcher.client.gke.steps import Plan
from launcher.core.errors import UsageError

# Kubelet fields (a node system configuration's) newer than some gclouds, with their source.
NEWER = {
    "shutdownGracePeriodSeconds": "GKE: Spot VMs (GKE API NodeKubeletConfig)",
    "shutdownGracePeriodCriticalPodsSeconds": "GKE: Spot VMs (GKE API NodeKubeletConfig)",
}
POOL_HELP = ["gcloud", "container", "node-pools", "create", "--help"]
UPDATE = (
    "update gcloud (`gcloud components update`; where a package manager installed it, its "
    "google-cloud-cli package), then run again"
)


def newer_fields(plan: Plan) -> list[str]:
    """The NEWER fields the plan's node system configurations set."""
    used = set()
    for step in plan.steps:
        if step.writes:
            config = yaml.safe_load(step.writes[1]) or {}
            used |= set(config.get("kubeletConfig", {})) & set(NEWER)
    return sorted(used)


def unknown_to_gcloud(fields: list[str], help_text: str) -> list[str]:
    """The fields gcloud's node-pools create help does not list (its kubelet fields table)."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", help_text)  # help's bold, when a terminal asks
    return [f for f in fields if not re.search(rf"\b{re.escape(f)}\b", plain)]


def require_gcloud_knows(plan: Plan) -> None:
    """Stops gke up, before any step, where the installed gcloud lacks what the plan uses."""
    fields = newer_fields(plan)
    if not fields or shutil.which("gcloud") is None:
        return
    shown = run("read gcloud's node-pools create help", POOL_HELP, capture=True, check=False)
    if missing := unknown_to_gcloud(fields, shown.stdout):
        sources = "; ".join(f"{f}: {NEWER[f]}" for f in missing)
        raise UsageError(
            "gcloud",
            f"the installed gcloud does not know {', '.join(missing)} in a node system "
            f"configuration, which this plan's Spot pools set ({sources}); it would refuse "
            "them after the cluster is made",
            UPDATE,
        )
