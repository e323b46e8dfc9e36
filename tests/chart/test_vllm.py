"""The vLLM serving option: one single-host TPU slice per replica, the model read from the
bucket mount, an OpenAI-compatible endpoint behind a ClusterIP Service, readiness on the model
answering, and `helm test` asking it for a completion."""

from __future__ import annotations

import pytest

from harness.helm import VALUES, by_kind, render
from launcher.core.runtime_door import JOB_ENTRYPOINT
from launcher.core.tpu.table import GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL, tpu_type

pytestmark = pytest.mark.chart
VLLM_VALUES = VALUES / "v6e-8-vllm.yaml"


def _serving(docs):
    (deployment,) = by_kind(docs, "Deployment")
    (service,) = by_kind(docs, "Service")
    return deployment, service


def test_one_single_host_slice_per_replica_as_the_table_derives_it():
    deployment, _ = _serving(render(VLLM_VALUES, "--set", "vllm.replicas=2"))
    shape = tpu_type("v6e-8")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["nodeSelector"] == {
        GKE_ACCELERATOR_LABEL: shape.generation.gke_accelerator,
        GKE_TOPOLOGY_LABEL: shape.topology,
    }
    chips = str(shape.chips_per_host)
    assert container["resources"]["requests"]["google.com/tpu"] == chips
    assert container["resources"]["limits"]["google.com/tpu"] == chips
    # Every device of the host is one tensor-parallel group.
    assert f"--tensor-parallel-size={shape.devices_per_host}" in container["args"]


def test_an_ironwood_host_serves_over_its_eight_devices():
    """tpu7x-8 is one tpu7x-standard-4t VM: 4 chips (google.com/tpu: 4) of two TensorCores, each
    a device to JAX and vLLM: one tensor-parallel group of 8 (Cloud TPU: TPU7x (Ironwood))."""
    deployment, _ = _serving(render(VALUES / "tpu7x-8-vllm.yaml"))
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["nodeSelector"] == {GKE_ACCELERATOR_LABEL: "tpu7x", GKE_TOPOLOGY_LABEL: "2x2x1"}
    assert container["resources"]["limits"]["google.com/tpu"] == "4"
    assert "--tensor-parallel-size=8" in container["args"]


def test_the_model_comes_from_the_bucket_mount_and_answers_before_ready():
    deployment, service = _serving(render(VLLM_VALUES))
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["vllm", "serve"]
    assert container["args"][0] == "/data/models/llama3-8b"
    assert "--served-model-name=tpu" in container["args"]  # the release's name by default
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/data"] == "gcs-fuse-csi-ephemeral"
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["HF_HUB_OFFLINE"] == "1"
    # The API key from the Secret, never in the args; the bucket read-only, the root too.
    assert env["VLLM_API_KEY"] == {"secretKeyRef": {"name": "vllm-api-key", "key": "api-key"}}
    assert not any("api-key" in a for a in container["args"])
    (bucket,) = [v for v in pod["volumes"] if v["name"] == "gcs-fuse-csi-ephemeral"]
    assert bucket["csi"]["readOnly"] is True
    assert [m.get("readOnly") for m in container["volumeMounts"] if m["mountPath"] == "/data"] == [
        True
    ]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["serviceAccountName"] == "tpu-vllm"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe
    # Loading and compiling take minutes: the startup probe allows startupSeconds.
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] == 1800
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"][0]["port"] == 8000
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_meets_restricted_pod_security():
    deployment, _ = _serving(render(VLLM_VALUES))
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["automountServiceAccountToken"] is False
    security = pod["containers"][0]["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]


def test_load_balancer_only_when_asked_internal_by_default():
    _, service = _serving(
        render(
            VLLM_VALUES,
            *("--set", "vllm.service.type=LoadBalancer"),
            *("--set", "vllm.service.loadBalancerSourceRanges={10.0.0.0/8}"),
        )
    )
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["metadata"]["annotations"]["networking.gke.io/load-balancer-type"] == "Internal"
    _, service = _serving(
        render(
            VLLM_VALUES,
            "--set",
            "vllm.service.type=LoadBalancer",
            "--set",
            "vllm.service.internal=false",
            "--set",
            "vllm.service.loadBalancerSourceRanges={10.0.0.0/8}",
        )
    )
    assert "annotations" not in service["metadata"]
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]


def test_helm_test_asks_the_served_model_for_a_completion():
    docs = render(VLLM_VALUES, "--set", "vllm.servedModelName=demo")
    (pod,) = by_kind(docs, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    command = pod["spec"]["containers"][0]["command"]
    assert command[:4] == [*JOB_ENTRYPOINT, "serving-check"]
    assert "--url=http://tpu-vllm:8000" in command and "--model=demo" in command
    # The check sends the key from the release's Secret (and proves a request without it fails).
    (env,) = pod["spec"]["containers"][0]["env"]
    assert env == {
        "name": "VLLM_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "vllm-api-key", "key": "api-key"}},
    }


def test_no_serving_objects_unless_an_engine_is_named():
    docs = render(None)
    assert not by_kind(docs, "Deployment") and not by_kind(docs, "JobSet")


def _cache(docs: list[dict]) -> tuple[str, str]:
    """(VLLM_XLA_CACHE_PATH, the bucket directory mounted there) of the vLLM server."""
    deployment, _ = _serving(docs)
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounted = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    found = [v for v in pod["volumes"] if mounted.get(v["name"]) == env["VLLM_XLA_CACHE_PATH"]]
    if not found:
        return env["VLLM_XLA_CACHE_PATH"], ""
    (volume,) = found
    options = dict(
        o.split("=", 1)
        for o in volume["csi"]["volumeAttributes"]["mountOptions"].split(",")
        if "=" in o
    )
    assert not volume["csi"].get("readOnly")  # the one directory the server writes
    return env["VLLM_XLA_CACHE_PATH"], options["only-dir"]


def test_the_compile_cache_is_a_bucket_directory_of_this_model_slice_and_image():
    """A restart loads what the last start compiled: the same model, slice and vLLM image find
    the same directory; any of them changed finds another (programs never cross)."""
    path, directory = _cache(render(VLLM_VALUES))
    assert path == "/xla-cache"
    assert directory.startswith("vllm-xla-cache/llama3-8b-") and directory.endswith(
        "_v6e-8_v0.32.0"
    )
    assert directory.count("/") == 1  # one segment under the prefix gke plan grants
    again = _cache(render(VLLM_VALUES))[1]
    other_model = _cache(render(VLLM_VALUES, "--set", "vllm.model=/data/models/other"))[1]
    other_image = _cache(render(VLLM_VALUES, "--set", "vllm.image.tag=v0.33.0"))[1]
    assert again == directory and len({directory, other_model, other_image}) == 3
    off = _cache(render(VLLM_VALUES, "--set", "vllm.compileCache.onBucket=false"))
    assert off == ("/tmp/vllm_xla_cache", "")
