"""Before `gke up` changes anything: does the installed gcloud take the plan's node system
configurations? An older gcloud refuses a field only when its step runs, after the cluster and
its CPU pool bill. Asked of the installed gcloud's own loader, offline, not of its help (which
omits fields the loader takes) nor of a version table: each pool step that reads a system
configuration is run as the plan would run it, with the file written to a directory of the
check's own and every request of gcloud's sent where nothing listens (`sandbox`). gcloud reads
the file before it sends anything: a field it does not take is refused then; a file it takes
ends in the refused connection. Nothing reaches Google; nothing is made.

What some gclouds lack (NEWER): the node shutdown fields of a Spot pool's system
configuration. gcloud 528.0.0's loader refuses both ("unknown fields" in kubeletConfig), though
GKE's API (NodeKubeletConfig) has them."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from launcher.client.commands import run
from launcher.client.gke.steps import Plan, Step
from launcher.core.errors import UsageError

# Kubelet fields (a node system configuration's) newer than some gclouds, with their source.
NEWER = {
    "shutdownGracePeriodSeconds": "GKE: Spot VMs (GKE API NodeKubeletConfig)",
    "shutdownGracePeriodCriticalPodsSeconds": "GKE: Spot VMs (GKE API NodeKubeletConfig)",
}
CONFIG_FLAG = "--system-config-from-file="
# Where the check's gcloud sends its requests: a port nothing listens on (1: tcpmux, never
# served), GKE's API overridden (gcloud's api_endpoint_overrides/container property).
NOWHERE = "http://127.0.0.1:1/"
# An older gcloud's loader (528.0.0's api_lib/container/util.py): `Invalid node config: unknown
# fields: ['a', 'b'] in "kubeletConfig"`.
UNKNOWN_FIELDS = re.compile(r"unknown fields: \[([^\]]*)\]")
UPDATE = (
    "update gcloud (`gcloud components update`; where a package manager installed it, its "
    "google-cloud-cli package), then run again"
)


def sandbox(directory: Path) -> dict[str, str]:
    """gcloud's environment for the check: a configuration of its own in `directory` (the
    user's account, project and properties unread and untouched), a placeholder token (no
    credential is read or refreshed), no prompt, and GKE's API at NOWHERE."""
    token = directory / "token"
    token.write_text("placeholder: the check sends no request anywhere that answers\n")
    return {
        "CLOUDSDK_CONFIG": str(directory / "config"),
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER": NOWHERE,
    }


def _config_readers(plan: Plan) -> list[tuple[Step, str]]:
    """The plan's steps that read a system configuration, each with the word naming it."""
    return [
        (step, word)
        for step in plan.steps
        if not step.for_each
        for word in step.argv
        if word.startswith(CONFIG_FLAG)
    ]


def refused_fields(plan: Plan) -> list[str]:
    """The kubelet fields the installed gcloud's loader refuses in the plan's system
    configurations (empty: it takes them all)."""
    written = {step.writes[0]: step.writes[1] for step in plan.steps if step.writes}
    refused: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="tpu-launcher-gcloud-check-") as tmp:
        env = sandbox(Path(tmp))
        for index, (step, reads) in enumerate(_config_readers(plan)):
            copy = Path(tmp) / f"system-config-{index}.yaml"
            copy.write_text(written.get(reads.removeprefix(CONFIG_FLAG), ""))
            argv = [f"{CONFIG_FLAG}{copy}" if w == reads else w for w in step.argv]
            tried = run(f"ask gcloud's loader about {step.what}", argv, env=env, capture=True,
                        check=False)  # fmt: skip
            if found := UNKNOWN_FIELDS.search(tried.stderr or ""):
                refused |= {f.strip().strip("'\"") for f in found[1].split(",") if f.strip()}
    return sorted(refused)


def require_gcloud_knows(plan: Plan) -> None:
    """Stops gke up, before any step, where the installed gcloud refuses what the plan uses."""
    if not _config_readers(plan) or not shutil.which("gcloud"):
        return
    if refused := refused_fields(plan):
        sources = "; ".join(f"{f}: {NEWER.get(f, 'GKE API NodeKubeletConfig')}" for f in refused)
        raise UsageError(
            "gcloud",
            f"the installed gcloud does not know {', '.join(refused)} in a node system "
            f"configuration, which this plan's Spot pools set ({sources}); it would refuse "
            "them after the cluster is made",
            UPDATE,
        )
