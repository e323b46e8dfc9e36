"""Validators for rendered objects: CRDs (KubeRay v1.7.0, JobSet v0.12.0) from ../shared/k8s/crds
and core Kubernetes kinds from the OpenAPI spec shipped in the k8s.io/kubernetes Go module.

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

from tests.chart.helm import pins
from tests.conftest import REPO

CRDS = REPO.parent / "shared" / "k8s" / "crds"
assert CRDS.is_dir(), (
    f"{CRDS} is missing: the chart tests read the KubeRay v1.7.0 and JobSet v0.12.0 CRDs from "
    "../shared/k8s beside the checkout (KubeRay's ray-operator v1.7.0 module is not served by "
    "the Go module proxy, so they cannot be fetched from there)")
KUBERNETES_MODULE = f"k8s.io/kubernetes@{pins()['K8S_VERSION']}"
CRD_FILES = {("ray.io", "RayCluster"): "ray.io_rayclusters.yaml",
             ("jobset.x-k8s.io", "JobSet"): "jobset.x-k8s.io_jobsets.yaml"}


def _strict(schema):
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
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
    crd = yaml.safe_load((CRDS / CRD_FILES[(group, kind)]).read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    schema = _strict(copy.deepcopy(served["schema"]["openAPIV3Schema"]))
    # apiVersion/kind/metadata are the API server's, not the CRD's, to check.
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


@cache
def _openapi_dir() -> Path:
    out = subprocess.run(["go", "mod", "download", "-json", KUBERNETES_MODULE],
                         capture_output=True, text=True, check=True, cwd="/")
    return Path(json.loads(out.stdout)["Dir"]) / "api" / "openapi-spec" / "v3"


@cache
def core_validator(api_version: str, kind: str) -> jsonschema.Draft202012Validator:
    group, _, version = api_version.rpartition("/")
    name = f"apis__{group}__{version}_openapi.json" if group else f"api__{version}_openapi.json"
    spec = json.loads((_openapi_dir() / name).read_text())
    text = json.dumps(spec["components"]["schemas"])
    text = text.replace('"#/components/', '"urn:k8s#/components/')  # refs into the registry
    schemas = _strict(json.loads(text))
    target = next(
        key for key, s in schemas.items()
        for gvk in s.get("x-kubernetes-group-version-kind", [])
        if gvk["kind"] == kind and gvk["version"] == version and gvk["group"] == group
    )
    doc = {"components": {"schemas": schemas}}
    registry = Registry().with_resource("urn:k8s", Resource.opaque(doc))
    return jsonschema.Draft202012Validator({"$ref": f"urn:k8s#/components/schemas/{target}"},
                                           registry=registry)


def validate(obj: dict) -> list[str]:
    """Every schema error of `obj`, as 'path: message' lines."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    group = api_version.split("/")[0] if "/" in api_version else ""
    validator = (crd_validator(api_version, kind) if (group, kind) in CRD_FILES
                 else core_validator(api_version, kind))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(obj)]
