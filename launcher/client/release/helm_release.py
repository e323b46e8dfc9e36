"""Reach a chart release from this machine: find its RayCluster, read its token, and
port-forward its head Service (ClusterIP by design) to a free local port; read what it tells
its jobs (its facts: preflight's target, the jobs' defaults)."""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from launcher.client.commands import run, start
from launcher.client.jobs.ray_api import Dashboard
from launcher.client.kube_context import kubectl
from launcher.core.errors import UsageError
from launcher.core.ray_auth import DASHBOARD_PORT
from launcher.core.release_facts import RELEASE_ENV, ReleaseFacts

if TYPE_CHECKING:
    from launcher.core.job.frameworks import Framework


def _kubectl(namespace: str, *args: str) -> list[str]:
    return kubectl("-n", namespace, *args)


def _get(step: str, argv: list[str], dry_run: bool) -> str:
    """What kubectl prints; a kubectl that fails (no cluster, an expired login, a missing auth
    plugin, another context) fails the command with kubectl's own words, never read as
    "nothing found". The queries list (`items[*]`), so nothing found is an empty answer."""
    proc = run(step, argv, capture=True, dry_run=dry_run)
    return "" if dry_run else proc.stdout.strip()


def get_items(
    namespace: str, kind: str, *args: str, dry_run: bool = False, optional: bool = False
) -> list[dict[str, Any]]:
    """`kubectl get KIND ... -o json` in the namespace, as its list of items: kubectl's own
    error where it fails (as _get), except for an `optional` kind this cluster may not serve
    (Kueue's, where Kueue is not installed): none."""
    argv = _kubectl(namespace, "get", kind, *args, "-o", "json")
    step = f"read the release's {kind}"
    if optional and not dry_run:
        proc = run(step, argv, capture=True, check=False)
        out = proc.stdout if proc.returncode == 0 else ""
    else:
        out = _get(step, argv, dry_run)
    return list(json.loads(out).get("items", [])) if out.strip() else []


# KubeRay labels the RayCluster a RayService makes with the RayService's labels (the release's
# instance too) and this one (ray-operator controllers/ray/utils/constant.go).
ORIGINATED_FROM = "ray.io/originated-from-crd"


def secret_value(namespace: str, name: str, key: str, step: str, dry_run: bool = False) -> str:
    """One key of a Secret, decoded ("" where the Secret has no such key); kubectl's own error
    where it cannot be read. The value is never printed or put in the environment."""
    path = key.replace(".", "\\.")  # a dot in a key name is escaped in kubectl's JSONPath
    argv = _kubectl(namespace, "get", "secret", name, "-o", f"jsonpath={{.data.{path}}}")
    encoded = _get(step, argv, dry_run)
    return base64.b64decode(encoded).decode() if encoded else ""


@dataclass(frozen=True)
class Release:
    """An installed release as its KubeRay objects say it, read with one kubectl call: its
    RayCluster (a RayJob release's, once KubeRay made it) and its RayJob (None: a standing
    cluster). Everything a command asks of a release comes from here."""

    name: str
    namespace: str
    raycluster: dict[str, Any] | None
    rayjob: dict[str, Any] | None

    @classmethod
    def read(cls, name: str, namespace: str, dry_run: bool = False) -> Release:
        selector = f"app.kubernetes.io/instance={name}"
        first: dict[str, dict[str, Any]] = {}
        for item in get_items(namespace, "raycluster,rayjob", "-l", selector, dry_run=dry_run):
            labels = item.get("metadata", {}).get("labels", {})
            if labels.get(ORIGINATED_FROM) == "RayService":  # vLLM's: serves, runs no jobs
                continue
            first.setdefault(str(item.get("kind")), item)
        return cls(name, namespace, first.get("RayCluster"), first.get("RayJob"))

    def owners(self) -> set[str]:
        """The names of its RayCluster and RayJob (what Kueue's workloads name as owners)."""
        return {o["metadata"]["name"] for o in (self.raycluster, self.rayjob) if o is not None}

    def cluster(self) -> dict[str, Any]:
        """The release's RayCluster; refused with the fix when it has none."""
        if self.raycluster is None:
            raise UsageError(
                "--release",
                f"no RayCluster of release {self.name!r} in namespace {self.namespace!r}",
                f"check `helm list -n {self.namespace}` and pass --namespace, or install it: "
                f"tpu-launcher install --release {self.name} --values <values file>",
            )
        return self.raycluster

    def facts(self) -> ReleaseFacts:
        """What the release tells its jobs, as its chart wrote it on the RayCluster's head
        (launcher.core.release_facts); refused with the fix for a release whose chart did not."""
        where = f"release {self.name}'s {RELEASE_ENV}"
        found = ReleaseFacts.of_cluster_spec(self.cluster()["spec"], where)
        if found is None:
            raise UsageError(
                "--release",
                f"release {self.name!r} was installed by an older chart: its RayCluster's head "
                f"carries no {RELEASE_ENV} (what the release tells its jobs)",
                f"upgrade it with this launcher's chart: tpu-launcher install --release "
                f"{self.name} --values <its values file>",
            )
        return found

    def image(self) -> str:
        """The launcher image the release's head runs."""
        containers = self.cluster()["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
        return str(containers[0].get("image", ""))


@contextlib.contextmanager
def forwarded(
    release: str | Release,
    namespace: str,
    dry_run: bool = False,
    framework: Framework | None = None,
) -> Iterator[Dashboard]:
    """Yields `release`'s dashboard (a name, or one already read) forwarded here, with the
    release's token where auth is on (jobs.ray_api.Dashboard: sent to that address only, never
    put in the environment). Three kubectl calls at most: the release (unless read already),
    its token Secret (with auth on), the port-forward."""
    if isinstance(release, str):
        release = Release.read(release, namespace, dry_run)
    if dry_run:  # as the chart makes it: token auth, KubeRay's Secret
        cluster: dict[str, Any] = {
            "metadata": {"name": "<cluster>"},
            "spec": {"authOptions": {"mode": "token"}},
        }
    else:
        cluster = release.cluster()
    name = cluster["metadata"]["name"]
    auth, token = cluster["spec"].get("authOptions") or {}, ""
    if auth.get("mode") == "token":
        # KubeRay names the Secret it creates after the cluster; a user's is named in the spec.
        secret = auth.get("secretName") or name
        token = secret_value(namespace, secret, "auth_token", "read the Ray token", dry_run)
    image = "" if dry_run else release.image()
    if image and (differs := client_skew(image)):
        print(f"note: {differs}", flush=True)
    if framework is not None and image:
        refuse_other_framework(image, framework, release.name)
    with port_forward(namespace, f"service/{name}-head-svc", DASHBOARD_PORT, dry_run) as address:
        yield Dashboard(address, token)


def refuse_other_framework(image: str, job: Framework, release: str) -> None:
    """A job of `job`'s framework, before it is sent to a release running the other's image
    (its tag's suffix says which; the chart pairs it with ray.framework)."""
    from launcher.client.release.image_tag import image_tag_of
    from launcher.core.job.frameworks import of_image_tag

    runs = of_image_tag(image_tag_of(image))
    if runs is not job:
        raise UsageError(
            "--release",
            f"{release} runs the launcher image {image}, built for {runs.describe}: a "
            f"{job.describe} job cannot run there",
            f"install a release with ray.framework={job.name} for it, or submit with "
            f"--framework {runs.name}",
        )


def client_skew(image: str) -> str | None:
    """How this client differs from the launcher image `image` (a release's head's)."""
    from launcher.client.release.chart_source import packaged_chart
    from launcher.client.release.image_tag import image_sources, skew
    from launcher.core.package_version import installed_version

    if (mine := installed_version()) is None:  # a source tree never installed: nothing to compare
        return None
    chart = packaged_chart()
    sources = image_sources(chart)
    return skew(image, mine, sources.tag(chart) if sources else None)


@contextlib.contextmanager
def port_forward(namespace: str, target: str, port: int, dry_run: bool = False) -> Iterator[str]:
    """Yields http://127.0.0.1:<free port> forwarded to `port` of `target` (service/NAME)
    while the block runs."""
    proc = start(
        f"port-forward {target}",
        _kubectl(namespace, "port-forward", target, f":{port}"),
        dry_run=dry_run,
    )
    if proc is None:
        yield "http://127.0.0.1:<port>"
        return
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not m:
            raise UsageError(
                "--release",
                f"kubectl port-forward to {target} failed: {line.strip() or 'no output'}",
                f"check `kubectl -n {namespace} get {target}` and its pods",
            )
        yield f"http://127.0.0.1:{m[1]}"
    finally:
        proc.terminate()


def find_service(
    release: str, namespace: str, component: str, dry_run: bool = False
) -> tuple[str, int]:
    """The name and port of `release`'s Service of a component (app.kubernetes.io/component)."""
    selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component={component}"
    found = _get(
        f"find the release's {component} Service",
        _kubectl(
            namespace,
            "get",
            "service",
            "-l",
            selector,
            "-o",
            'jsonpath={range .items[*]}{.metadata.name} {.spec.ports[0].port}{"\\n"}{end}',
        ),
        dry_run,
    ).partition("\n")[0]
    if dry_run:
        return "<service>", 0
    name, _, port = found.partition(" ")
    if not name or not port.isdigit():
        raise UsageError(
            "--release",
            f"release {release!r} in namespace {namespace!r} has no {component} Service",
            f"check `helm list -n {namespace}` and that the release serves with it "
            "(serving.engine)",
        )
    return name, int(port)


def rayjob_state(rayjob: dict) -> tuple[str | None, str]:
    """The Ray job id of a release's RayJob once KubeRay submitted it, and its state in words."""
    name, spec = rayjob["metadata"]["name"], rayjob["spec"]
    status = rayjob.get("status") or {}
    from launcher.client.gke.queue import QUEUE_LABEL

    queue = rayjob["metadata"].get("labels", {}).get(QUEUE_LABEL)
    if spec.get("suspend"):
        waits = f"waiting for Kueue's queue {queue} to admit it whole" if queue else "suspended"
        return None, f"RayJob {name}: suspended, {waits}; its cluster is not created yet"
    deployment = status.get("jobDeploymentStatus") or "New"
    job = status.get("jobId") or None
    ray_state = status.get("jobStatus") or "not submitted yet"
    return job, f"RayJob {name}: {deployment}, job {job or '-'} {ray_state}"
