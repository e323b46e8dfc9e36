"""Whatever the chart accepts, the API server accepts: Hypothesis draws, from values.schema.json's
own patterns, values for the keys a user types by hand (names, quantities, ports, tags, labels,
env, the bucket); each draw is rendered, and either the chart's own checks refuse it with a
message naming a key, or every object it renders passes a server-side dry-run create in the
control plane (the API server's validation, KubeRay's, JobSet's and LeaderWorkerSet's CRD
schemas, JobSet's webhooks). Invalid values are the refusal table's
(tests/chart/test_invalid_values.py)."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.helm import CHART, helm
from harness.kube import Release

pytestmark = pytest.mark.cluster

SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def _resolve(node: dict) -> dict:
    while "$ref" in node:
        node = SCHEMA["definitions"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _node(path: str) -> dict:
    """The schema of a value path (a.b.c; `*` a map's values, `items` a list's)."""
    node = SCHEMA
    for key in path.split("."):
        node = _resolve(
            _map_values(node)
            if key == "*"
            else node["items"]
            if key == "items"
            else node["properties"][key]
        )
    return node


def _map_values(node: dict) -> dict:
    """The schema of a map's values: additionalProperties, or (labels' keys are checked by
    patternProperties) the one pattern's that is not a refusal."""
    if isinstance(node.get("additionalProperties"), dict):
        return node["additionalProperties"]
    (values,) = [v for v in node["patternProperties"].values() if v is not False]
    return values


def _strings(node: dict) -> st.SearchStrategy[str]:
    node = _resolve(node)
    if "anyOf" in node:  # quantities: a number or a pattern
        return st.one_of(*(_strings(n) for n in node["anyOf"]))
    if node.get("type") == "number":
        return st.integers(min_value=0, max_value=10**6).map(str)
    limit = node.get("maxLength", 64)
    return st.from_regex(node.get("pattern", ".*"), fullmatch=True).filter(
        lambda s: len(s) <= limit
    )


def schema_strings(path: str) -> st.SearchStrategy[str]:
    """Strings the schema accepts at `path`: its pattern, its length bound."""
    return _strings(_node(path))


# A slice group's capacity: one, or a fallback's list (its ComputeClass, its node reader).
CAPACITIES = st.one_of(
    st.sampled_from(["on-demand", "spot"]),
    st.lists(
        st.sampled_from(["on-demand", "spot", "reservation:res-a", "reservation:res-b"]),
        min_size=2,
        max_size=3,
        unique=True,
    ),
)


@st.composite
def values(draw) -> dict:
    """Values the schema accepts for the keys users type by hand."""
    return {
        "ray": {
            "worker": {
                "tpu": {"capacity": draw(CAPACITIES)},
                "groupName": draw(schema_strings("ray.worker.groupName")),
                "env": [{"name": draw(schema_strings("ray.worker.env.items.name")), "value": "x"}],
                "resources": {
                    "requests": {"memory": draw(schema_strings("ray.worker.resources.requests.*"))}
                },
            },
            "head": {"nodeSelector": {"pool": draw(schema_strings("ray.head.nodeSelector.*"))}},
            "image": {"tag": draw(schema_strings("ray.image.tag"))},
            "fullnameOverride": draw(schema_strings("ray.fullnameOverride")),
            "serviceAccount": {"name": draw(schema_strings("ray.serviceAccount.name"))},
            "auth": {"existingSecret": draw(schema_strings("ray.auth.existingSecret"))},
        },
        "networkPolicy": {
            "clients": [
                {
                    "podSelector": {
                        "matchLabels": {"role": draw(schema_strings("ray.head.nodeSelector.*"))}
                    }
                }
            ]
        },
        "global": {
            "shmSizeLimit": draw(schema_strings("global.shmSizeLimit")),
            "gcsfuse": {"bucketName": draw(schema_strings("global.gcsfuse.bucketName"))},
        },
        "serving": {"engine": draw(st.sampled_from(["saxml", "vllm"]))},
        "saxml": {
            "http": {"service": {"port": draw(st.integers(min_value=1, max_value=65535))}},
        },
        "vllm": {
            "model": "/data/" + draw(st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True)),
            "servedModelName": draw(schema_strings("vllm.servedModelName")),
            "tpu": {
                "type": draw(st.sampled_from(["v6e-8", "v6e-16"])),
                "capacity": draw(CAPACITIES),
            },
            "controller": draw(st.sampled_from(["", "lws"])),
            "apiKey": {"secretName": draw(schema_strings("vllm.apiKey.secretName"))},
            "serviceAccount": {"name": draw(schema_strings("vllm.serviceAccount.name"))},
            "service": {"port": draw(st.integers(min_value=1, max_value=65535))},
        },
    }


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,  # the same draws on every run: a failure reproduces
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=values())
def test_what_the_chart_accepts_the_api_server_accepts(release: Release, tmp_path, drawn):
    path = tmp_path / "drawn.yaml"
    path.write_text(yaml.safe_dump(drawn))
    # (--skip-tests: helm test's objects are created by helm test, with their account)
    argv = [str(helm(3)), "template", release.name, str(CHART), "-n", release.namespace]
    rendered = subprocess.run(
        [*argv, "-f", str(path), "--skip-tests"],
        capture_output=True,
        text=True,
    )
    if rendered.returncode:
        # Refused: the message names a key, as every refusal does.
        assert "VALUES REFUSED" in rendered.stderr or "at '/" in rendered.stderr, rendered.stderr
        return
    created = subprocess.run(
        [*release.kubectl(), "create", "--dry-run=server", "-n", release.namespace, "-f", "-"],
        input=rendered.stdout,
        capture_output=True,
        text=True,
    )
    assert created.returncode == 0, (
        "the chart accepted values the API server rejects:\n"
        + yaml.safe_dump(drawn)
        + created.stderr
    )


@pytest.mark.parametrize("controller", ["rayservice", "lws"])
@pytest.mark.parametrize("tpu", ["v6e-16", "v5p-16", "tpu7x-16"])
def test_multi_host_vllm_is_admitted(release: Release, tpu: str, controller: str):
    """vLLM on a multi-host slice, as a RayService (KubeRay's CRD) and a LeaderWorkerSet
    (LWS's CRD, sigs.k8s.io/lws at LWS_VERSION): every object passes a server-side dry run."""
    sets = {
        "serving.engine": "vllm",
        "ray.enabled": "false",
        "global.gcsfuse.bucketName": "ckpt",
        "vllm.model": "/data/models/m",
        "vllm.apiKey.secretName": "k",
        "vllm.tpu.type": tpu,
        "vllm.controller": controller,
    }
    argv = [str(helm(3)), "template", release.name, str(CHART), "-n", release.namespace]
    rendered = subprocess.run(
        [*argv, "--skip-tests", *(w for k, v in sets.items() for w in ("--set", f"{k}={v}"))],
        capture_output=True,
        text=True,
    )
    assert rendered.returncode == 0, rendered.stderr
    kinds = {d["kind"] for d in yaml.safe_load_all(rendered.stdout) if d}
    assert {"rayservice": "RayService", "lws": "LeaderWorkerSet"}[controller] in kinds
    created = subprocess.run(
        [*release.kubectl(), "create", "--dry-run=server", "-n", release.namespace, "-f", "-"],
        input=rendered.stdout,
        capture_output=True,
        text=True,
    )
    assert created.returncode == 0, created.stderr
