"""Which Kubernetes cluster a command acts on, decided once per command and pinned on every
kubectl and helm call it makes (`--context`, `--kube-context`), never kubectl's current context
silently: a platform team with a staging and a production cluster in one kubeconfig installs
into the one it names, not the one its terminal last touched.

The cluster named, in order: `--kube-context`; else the GKE cluster the tutorials' variables
name (CLUSTER_NAME, with PROJECT_ID and LOCATION: the context `gcloud container clusters
get-credentials` writes, gke_PROJECT_LOCATION_CLUSTER), which must be in the kubeconfig (else
the command is refused with the get-credentials line); else kubectl's current context, said so.
Each command that resolves one says which on its first line (stderr: stdout stays the command's
own, for `--json` and pipes)."""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from launcher.core.errors import INSTALL_HINTS, UsageError

# The variables the GKE tutorials export, as `gke plan|up|down` read them (gke/target.py).
CLUSTER_ENV, PROJECT_ENV, LOCATION_ENV = "CLUSTER_NAME", "PROJECT_ID", "LOCATION"


@dataclass(frozen=True)
class KubeCluster:
    """The kubeconfig context a command acts on, and why that one (said to the user)."""

    context: str
    why: str

    def describe(self) -> str:
        return f"cluster: {self.context} ({self.why})"


_pinned: KubeCluster | None = None


def add_kube_context_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kube-context",
        metavar="CONTEXT",
        help="the kubeconfig context of the cluster to act on (default: the GKE cluster "
        f"{CLUSTER_ENV} names, gke_PROJECT_LOCATION_CLUSTER, else kubectl's current context)",
    )


def _kubeconfig(*args: str) -> tuple[int, str]:
    """`kubectl config ...`: reads the kubeconfig only, never a server."""
    try:
        proc = subprocess.run(["kubectl", "config", *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise UsageError(
            "kubectl", "kubectl is not installed: it reaches the release", INSTALL_HINTS["kubectl"]
        ) from None
    return proc.returncode, proc.stdout.strip()


def contexts() -> list[str]:
    code, out = _kubeconfig("get-contexts", "-o", "name")
    return out.splitlines() if code == 0 else []


def current_context() -> str | None:
    code, out = _kubeconfig("current-context")
    return out if code == 0 and out else None


def _get_credentials(cluster: str, project: str | None, location: str | None) -> str:
    return (
        f"gcloud container clusters get-credentials {cluster} --location "
        f"{location or '$LOCATION'} --project {project or '$PROJECT_ID'}"
    )


def resolve(
    flag: str | None = None,
    *,
    cluster: str | None = None,
    project: str | None = None,
    location: str | None = None,
    dry_run: bool = False,
) -> KubeCluster | None:
    """The cluster named by `flag` (--kube-context), else by the GKE variables (or the given
    cluster, project and location: install's --cluster and the rest), else kubectl's current
    context. Refused when what is named is not in the kubeconfig, except in a dry run, which
    shows the context named (None: nothing named and no current context)."""
    try:
        known, current = contexts(), current_context()
    except UsageError:
        if not dry_run:
            raise
        known, current = [], None  # a dry run shows the commands, kubectl or not
    if flag:
        if flag not in known and not dry_run:
            raise UsageError(
                "--kube-context",
                f"no context {flag!r} in your kubeconfig (it has: {', '.join(known) or 'none'})",
                "pass one of those, or fetch the cluster's credentials first "
                "(GKE: gcloud container clusters get-credentials CLUSTER --location LOCATION)",
            )
        return KubeCluster(flag, "--kube-context")
    cluster = cluster or os.environ.get(CLUSTER_ENV) or None
    if cluster:
        project = project or os.environ.get(PROJECT_ENV) or None
        location = location or os.environ.get(LOCATION_ENV) or None
        named = f"{CLUSTER_ENV}={cluster}"
        if project and location:
            wanted = [f"gke_{project}_{location}_{cluster}"]
        else:  # the one GKE context of that cluster name, whatever its project and location
            wanted = [c for c in known if c.startswith("gke_") and c.endswith(f"_{cluster}")]
            if len(wanted) > 1:
                raise UsageError(
                    CLUSTER_ENV,
                    f"{named} matches several contexts in your kubeconfig ({', '.join(wanted)})",
                    f"export {PROJECT_ENV} and {LOCATION_ENV} too, or pass --kube-context",
                )
        if dry_run and wanted and wanted[0] not in known:
            return KubeCluster(wanted[0], f"{named}; not in your kubeconfig yet")
        if not wanted or wanted[0] not in known:
            which = f" (its context {wanted[0]})" if wanted else ""
            raise UsageError(
                CLUSTER_ENV,
                f"{named} names GKE cluster {cluster}, but your kubeconfig has no credentials "
                f"for it{which}; kubectl's current context is {current or 'unset'}, and a "
                "command never acts on another cluster than the one named",
                f"{_get_credentials(cluster, project, location)}; or, for another cluster, "
                f"pass --kube-context (or unset {CLUSTER_ENV})",
            )
        why = named if wanted[0] == current else f"{named}; kubectl's current context, "
        why += "" if wanted[0] == current else f"{current or 'unset'}, is not used"
        return KubeCluster(wanted[0], why)
    if current is None and dry_run:
        return None
    if current is None:
        raise UsageError(
            "kubeconfig",
            "no cluster named: no --kube-context, no "
            f"{CLUSTER_ENV}, and kubectl has no current context",
            "pass --kube-context, or fetch the cluster's credentials "
            "(GKE: gcloud container clusters get-credentials CLUSTER --location LOCATION)",
        )
    return KubeCluster(current, "kubectl's current context")


@contextlib.contextmanager
def pinned(ns: argparse.Namespace) -> Iterator[KubeCluster | None]:
    """For the command's run: every kubectl and helm call goes to the cluster its flags (and,
    for install, --cluster and the rest of the GKE target's) name, said once; none pinned in a
    dry run that names none."""
    global _pinned
    cluster = resolve(
        getattr(ns, "kube_context", None),
        cluster=getattr(ns, "cluster", None),
        project=getattr(ns, "project", None),
        location=getattr(ns, "location", None),
        dry_run=bool(getattr(ns, "dry_run", False)),
    )
    if cluster:
        print(cluster.describe(), file=sys.stderr, flush=True)
    before, _pinned = _pinned, cluster
    try:
        yield cluster
    finally:
        _pinned = before


def kubectl(*args: str) -> list[str]:
    """kubectl's argv, on the pinned cluster where one is (a command without --release runs
    no kubectl)."""
    return ["kubectl", *(["--context", _pinned.context] if _pinned else []), *args]


def helm_context() -> list[str]:
    """helm's flag for the pinned cluster (none where nothing is pinned)."""
    return ["--kube-context", _pinned.context] if _pinned else []
