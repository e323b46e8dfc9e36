"""Validators for rendered objects: the CRDs the pinned operators ship (KubeRay's ray-operator
module at KUBERAY_VERSION, JobSet's at JOBSET_VERSION, LeaderWorkerSet's at LWS_VERSION, the
scrape objects' at GMP_VERSION and PROMETHEUS_OPERATOR_VERSION) and core Kubernetes kinds from
the OpenAPI spec in the k8s.io/kubernetes module at K8S_VERSION (ci/versions.env: the same pins
the test control plane builds). Go's module cache holds them once `make cluster-build` ran;
otherwise `go mod download` fetches them from the Go module proxy.

Both are made strict: an object schema that lists its properties rejects any other field, the
way a structural CRD prunes (silently loses) it. x-kubernetes-preserve-unknown-fields keeps its
meaning.
"""

from __future__ import annotations

import copy
import json
import subprocess
from functools import cache
from pathlib import Path

import jsonschema
import yaml
from referencing import Registry, Resource

from harness.paths import pins

KUBERAY_MODULE = f"github.com/ray-project/kuberay/ray-operator@{pins()['KUBERAY_VERSION']}"
JOBSET_MODULE = f"sigs.k8s.io/jobset@{pins()['JOBSET_VERSION']}"
LWS_MODULE = f"sigs.k8s.io/lws@{pins()['LWS_VERSION']}"
KUBERNETES_MODULE = f"k8s.io/kubernetes@{pins()['K8S_VERSION']}"
# The scrape objects' CRDs: GKE managed Prometheus' operator chart and prometheus-operator's.
GMP_MODULE = f"github.com/GoogleCloudPlatform/prometheus-engine@{pins()['GMP_VERSION']}"
PROMETHEUS_OPERATOR_MODULE = (
    f"github.com/prometheus-operator/prometheus-operator@{pins()['PROMETHEUS_OPERATOR_VERSION']}"
)
# (group, kind) -> (module, the CRD's path inside it)
CRD_FILES = {
    ("ray.io", "RayCluster"): (KUBERAY_MODULE, "config/crd/bases/ray.io_rayclusters.yaml"),
    ("ray.io", "RayJob"): (KUBERAY_MODULE, "config/crd/bases/ray.io_rayjobs.yaml"),
    ("ray.io", "RayService"): (KUBERAY_MODULE, "config/crd/bases/ray.io_rayservices.yaml"),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): (
        LWS_MODULE,
        "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    ),
    ("jobset.x-k8s.io", "JobSet"): (
        JOBSET_MODULE,
        "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
    ),
    ("monitoring.googleapis.com", "PodMonitoring"): (
        GMP_MODULE,
        "charts/operator/crds/monitoring.googleapis.com_podmonitorings.yaml",
    ),
    ("monitoring.coreos.com", "PodMonitor"): (
        PROMETHEUS_OPERATOR_MODULE,
        "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml",
    ),
}


@cache
def module_dir(module: str) -> Path:
    """The source of a pinned Go module (downloaded and checksum-verified by go)."""
    proc = subprocess.run(
        ["go", "mod", "download", "-json", module], capture_output=True, text=True, cwd="/"
    )
    info = json.loads(proc.stdout) if proc.stdout.strip() else {}
    assert proc.returncode == 0 and "Dir" in info, (
        f"go mod download {module} failed: {info.get('Error') or proc.stderr.strip()}"
    )
    return Path(info["Dir"])


def _strict(schema):
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        # int-or-string fields have no type in the spec; accept both as the API server does.
        if schema.get("x-kubernetes-int-or-string"):
            schema.pop("type", None)
            schema["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        return schema
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    return schema


@cache
def crd_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    group, version = api_version.split("/")
    module, path = CRD_FILES[(group, kind)]
    crd = yaml.safe_load((module_dir(module) / path).read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    schema = _strict(copy.deepcopy(served["schema"]["openAPIV3Schema"]))
    # apiVersion/kind/metadata are the API server's, not the CRD's, to check.
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def _openapi_dir() -> Path:
    return module_dir(KUBERNETES_MODULE) / "api" / "openapi-spec" / "v3"


@cache
def core_validator(api_version: str, kind: str) -> jsonschema.Draft202012Validator:
    group, _, version = api_version.rpartition("/")
    name = f"apis__{group}__{version}_openapi.json" if group else f"api__{version}_openapi.json"
    spec = json.loads((_openapi_dir() / name).read_text())
    text = json.dumps(spec["components"]["schemas"])
    text = text.replace('"#/components/', '"urn:k8s#/components/')  # refs into the registry
    schemas = _strict(json.loads(text))
    target = next(
        key
        for key, s in schemas.items()
        for gvk in s.get("x-kubernetes-group-version-kind", [])
        if gvk["kind"] == kind and gvk["version"] == version and gvk["group"] == group
    )
    doc = {"components": {"schemas": schemas}}
    registry = Registry().with_resource("urn:k8s", Resource.opaque(doc))
    return jsonschema.Draft202012Validator(
        {"$ref": f"urn:k8s#/components/schemas/{target}"}, registry=registry
    )


def validate(obj: dict) -> list[str]:
    """Every schema error of `obj`, as 'path: message' lines."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    group = api_version.split("/")[0] if "/" in api_version else ""
    validator = (
        crd_validator(api_version, kind)
        if (group, kind) in CRD_FILES
        else core_validator(api_version, kind)
    )
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)
    ]
