"""A policy scanner (checkov, pinned in ci/versions.env) on what the API server holds after an
install: the pods KubeRay, the JobSet controller and the Deployments actually created (not only
the templates, whose RayCluster and JobSet pod templates scanners do not read), the Services,
the accounts and their RBAC. Every finding is either fixed or accepted with its reason in the
chart README's "Policy scan" table; the test reads that table, so the two cannot drift."""

from __future__ import annotations

import json
import re
import subprocess

import pykube
import pytest
import yaml

from harness.helm import CHART
from harness.kube import SETTLE_S, Release, wait_for
from harness.paths import REPO, pins

pytestmark = pytest.mark.cluster
VALUES = REPO / "values"


class NetworkPolicy(pykube.objects.NamespacedAPIObject):
    version = "networking.k8s.io/v1"
    endpoint = "networkpolicies"
    kind = "NetworkPolicy"


KINDS = (
    NetworkPolicy,
    pykube.Pod,
    pykube.Deployment,
    pykube.Service,
    pykube.ServiceAccount,
    pykube.Role,
    pykube.RoleBinding,
)


def accepted_findings() -> dict[str, set[str]]:
    """check id -> the parts of the chart the README accepts it for (with its reason)."""
    text = (CHART / "README.md").read_text()
    section = text.split("\n## Policy scan", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(CKV2?_K8S_\d+)` \| ([a-z, ]+) \| [^|]+ \|$", section, re.M)
    assert rows, "the chart README has no Policy scan table"
    return {check: {p.strip() for p in parts.split(",")} for check, parts in rows}


def part_of(resource: str, release: str) -> str:
    """Which part of the chart a scanned resource (Kind.namespace.name) belongs to."""
    name = resource.split(".", 2)[2]
    for prefix, part in (
        (f"{release}-ray-test", "test"),
        (f"{release}-vllm-test", "test"),
        (f"{release}-vllm", "vllm"),
        (f"{release}-saxml", "saxml"),
        (f"{release}-ray", "ray"),
    ):
        if name.startswith(prefix):
            return part
    return "identity"


def live_objects(release: Release) -> list[dict]:
    """The namespace's objects as the API server returns them, without server bookkeeping."""
    found = []
    for kind in KINDS:
        for obj in kind.objects(release.api).filter(namespace=release.namespace):
            doc = {
                "apiVersion": obj.obj.get("apiVersion", kind.version),
                "kind": kind.kind,
                "metadata": {
                    k: v
                    for k, v in obj.obj["metadata"].items()
                    if k in ("name", "namespace", "labels", "annotations")
                },
                "spec": obj.obj.get("spec", {}),
            }
            for key in ("rules", "roleRef", "subjects", "automountServiceAccountToken"):
                if key in obj.obj:
                    doc[key] = obj.obj[key]
            if doc["metadata"]["name"] != "default":  # the namespace's own account
                found.append(doc)
    return found


def scan(objects: list[dict], tmp_path) -> list[tuple[str, str]]:
    """(check id, resource) for each failed check."""
    checkov = REPO / ".tools" / f"checkov-{pins()['CHECKOV_VERSION']}" / "bin" / "checkov"
    subprocess.run([str(REPO / "ci" / "install-checkov.sh"), pins()["CHECKOV_VERSION"]], check=True)
    manifests = tmp_path / "live"
    manifests.mkdir()
    (manifests / "objects.yaml").write_text(yaml.safe_dump_all(objects))
    proc = subprocess.run(
        [str(checkov), "-d", str(manifests), "--framework", "kubernetes", "-o", "json", "--quiet"],
        capture_output=True,
        text=True,
    )
    assert proc.stdout.strip(), proc.stderr
    reports = json.loads(proc.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    return sorted(
        (check["check_id"], check["resource"])
        for report in reports
        for check in report.get("results", {}).get("failed_checks", [])
    )


@pytest.mark.parametrize(
    ("values", "sets", "pod_security", "pods"),
    [
        ("v6e-16.yaml", [], "restricted", 6),  # head, 4 hosts, helm test's pod
        # Slices given back when idle: the head (its idle check beside it, its token, its Role)
        # and helm test's pod; no slice until a job asks.
        ("v6e-16.yaml", ["ray.worker.tpu.releaseIdleAfterSeconds=600"], "restricted", 2),
        ("v5e-32-saxml.yaml", [], "baseline", 18),  # off the host network (the tutorial's is on)
        ("v6e-8-vllm.yaml", [], "restricted", 2),  # the vLLM server, helm test's pod
    ],
    ids=["v6e-16", "v6e-16-idle-release", "v5e-32-saxml", "v6e-8-vllm"],
)
def test_live_objects_have_no_finding_the_readme_does_not_accept(
    release: Release, tmp_path, values, sets, pod_security, pods
):
    release.add_nodes_for(VALUES / values)
    release.pod_security(pod_security)
    flags = [a for s in sets for a in ("--set", s)]
    release.helm("install", release.name, str(CHART), *release.values_args(VALUES / values), *flags)
    release.helm("test", release.name, "--timeout", "5s", check=False)  # its pod, RBAC
    wait_for(
        f"{pods} pods to be scheduled",
        lambda: len([p for p in release.pods() if p.obj["spec"].get("nodeName")]) >= pods,
        SETTLE_S,
        explain=release.events,
    )
    objects = live_objects(release)
    assert {o["kind"] for o in objects} >= {"Pod", "Service", "ServiceAccount"}
    accepted = accepted_findings()
    findings = scan(objects, tmp_path)
    assert findings, "the scanner found nothing at all: it did not read the objects"
    unexplained = [
        f for f in findings if part_of(f[1], release.name) not in accepted.get(f[0], set())
    ]
    assert not unexplained, (
        "fix these, or accept each in the chart README's Policy scan table with its reason:\n"
        + "\n".join(f"{check} {resource}" for check, resource in unexplained)
    )


def test_the_readme_accepts_nothing_security_critical():
    """Privilege, capabilities, escalation, host namespaces and seccomp are accepted nowhere, and
    root nowhere but in Saxml's images (checkov's ids for them)."""
    never = {
        "CKV_K8S_16",  # privileged
        "CKV_K8S_20",  # allowPrivilegeEscalation
        "CKV_K8S_28",  # NET_RAW
        "CKV_K8S_31",  # seccomp
        "CKV_K8S_37",  # capabilities
        "CKV_K8S_17",  # host PID
        "CKV_K8S_18",  # host IPC
    }
    accepted = accepted_findings()
    assert never.isdisjoint(accepted)
    assert accepted["CKV_K8S_23"] == {"saxml"}  # Ray's and helm test's pods never run as root
