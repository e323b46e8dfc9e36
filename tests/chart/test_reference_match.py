"""The rendered objects carry what the published references put there, in every field that
decides scheduling, mounts and env:

- the GKE tutorial's Llama 3 8B job ("Train an LLM using JAX, Ray Train, and TPU Trillium on
  GKE", Google Cloud's kubernetes-engine-samples, ai-ml/gke-ray/raytrain/maxtext: a RayCluster
  on one v6e-16) and its Saxml serving tutorial ("Serve LLMs with Saxml on multi-host TPUs on
  GKE", ai-ml/llm-multihost-tpus-saxml), written below as facts;
- KubeRay's own multi-host TPU samples (v6e-16, v4-16, v6e-256), read from the pinned
  ray-operator module (config/samples/ray-cluster.tpu-*-multihost.yaml at KUBERAY_VERSION).
"""

from __future__ import annotations

import pytest
import yaml

from harness.helm import REPO, by_kind, render
from tests.support.k8s_schemas import KUBERAY_MODULE, module_dir

pytestmark = pytest.mark.chart
BUCKET = "ckpt-bucket"  # what harness.helm installs with

# The GKE tutorial's v6e-16 RayCluster: head (8 CPU, 16Gi) and one `tpu-group` of 4 hosts x 4
# chips (topology 4x4, tpu-v6e-slice), the bucket through gcsfuse's CSI driver at /data with
# implicit-dirs, an in-memory /dev/shm, and the gcsfuse sidecar annotations.
TUTORIAL_GCSFUSE_ANNOTATIONS = {
    "gke-gcsfuse/volumes": "true",
    "gke-gcsfuse/cpu-limit": "0",
    "gke-gcsfuse/memory-limit": "0",
    "gke-gcsfuse/ephemeral-storage-limit": "0",
}
TUTORIAL_MOUNTS = [("dshm", "/dev/shm"), ("gcs-fuse-csi-ephemeral", "/data")]
TUTORIAL_CSI = {"gcs-fuse-csi-ephemeral": ("gcsfuse.csi.storage.gke.io", BUCKET)}
TUTORIAL_WORKER = {
    "nodeSelector": {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
    },
    "tpu": {"limits": "4", "requests": "4"},
    "memory": {"limits": "200G", "requests": "200G"},
    "env": {"JAX_PLATFORMS": "tpu", "ENABLE_PJRT_COMPATIBILITY": "true"},
    "mounts": TUTORIAL_MOUNTS,
    "csi": TUTORIAL_CSI,
    "implicit_dirs": True,
    "shm": ["Memory"],
    "annotations": TUTORIAL_GCSFUSE_ANNOTATIONS,
}
TUTORIAL_HEAD = {
    "nodeSelector": {},
    "tpu": {"limits": "None", "requests": "None"},
    "memory": {"limits": "16Gi", "requests": "16Gi"},
    "env": {},
    "mounts": TUTORIAL_MOUNTS,
    "csi": TUTORIAL_CSI,
    "implicit_dirs": True,
    "shm": ["Memory"],
    "annotations": TUTORIAL_GCSFUSE_ANNOTATIONS,
}
TUTORIAL_HEAD_PORTS = [("client", 10001), ("dashboard", 8265), ("gcs-server", 6379)]
TUTORIAL_HEAD_RESOURCES = {"limits": {"memory": "16Gi"}, "requests": {"cpu": "8", "memory": "16Gi"}}


def _env(container: dict) -> dict:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def _scheduling(template: dict) -> dict:
    """What decides where a pod runs and what it sees: selectors, TPU and memory, env, mounts."""
    spec = template["spec"]
    (c,) = spec["containers"]
    csi = {v["name"]: v["csi"] for v in spec["volumes"] if "csi" in v}
    return {
        "nodeSelector": {
            k: str(v)
            for k, v in spec.get("nodeSelector", {}).items()
            if k.startswith("cloud.google.com/gke-tpu")
        },
        "tpu": {k: str(v.get("google.com/tpu")) for k, v in c["resources"].items()},
        "memory": {k: str(v.get("memory")) for k, v in c["resources"].items()},
        "env": {
            k: v for k, v in _env(c).items() if k in ("JAX_PLATFORMS", "ENABLE_PJRT_COMPATIBILITY")
        },
        "mounts": sorted((m["name"], m["mountPath"]) for m in c["volumeMounts"]),
        "csi": {k: (v["driver"], v["volumeAttributes"]["bucketName"]) for k, v in csi.items()},
        "implicit_dirs": all(
            "implicit-dirs" in v["volumeAttributes"]["mountOptions"] for v in csi.values()
        ),
        "shm": [v["emptyDir"]["medium"] for v in spec["volumes"] if v["name"] == "dshm"],
        "annotations": {
            k: v
            for k, v in template["metadata"].get("annotations", {}).items()
            if k.startswith("gke-gcsfuse/")
        },
    }


@pytest.fixture(scope="module")
def v6e_16() -> dict:
    (ours,) = by_kind(render(REPO / "values" / "v6e-16.yaml"), "RayCluster")
    return ours


def test_v6e_16_raycluster_matches_the_gke_tutorial(v6e_16):
    (group,) = v6e_16["spec"]["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"], group["numOfHosts"]) == ("tpu-group", 1, 4)
    assert _scheduling(group["template"]) == TUTORIAL_WORKER
    head = v6e_16["spec"]["headGroupSpec"]["template"]
    assert _scheduling(head) == TUTORIAL_HEAD
    (container,) = head["spec"]["containers"]
    assert sorted((p["name"], p["containerPort"]) for p in container["ports"]) == (
        TUTORIAL_HEAD_PORTS
    )
    assert container["resources"] == TUTORIAL_HEAD_RESOURCES


# KubeRay's multi-host TPU samples (config/samples in the pinned ray-operator module) and the
# values file that names the same slice.
KUBERAY_SAMPLES = {
    "v6e-16.yaml": "ray-cluster.tpu-v6e-16-multihost.yaml",
    "v4-16.yaml": "ray-cluster.tpu-v4-multihost.yaml",
    "v6e-256.yaml": "ray-cluster.tpu-v6e-256-multihost.yaml",
}


@pytest.mark.parametrize(("values", "sample"), KUBERAY_SAMPLES.items())
def test_raycluster_matches_kuberays_own_tpu_sample_in_every_scheduling_field(values, sample):
    sample_path = module_dir(KUBERAY_MODULE) / "config" / "samples" / sample
    (ref_cluster,) = [d for d in yaml.safe_load_all(sample_path.read_text()) if d]
    (ours_cluster,) = by_kind(render(REPO / "values" / values), "RayCluster")
    (ref,), (ours,) = (c["spec"]["workerGroupSpecs"] for c in (ref_cluster, ours_cluster))
    for key in ("groupName", "replicas", "numOfHosts"):
        assert ours[key] == ref[key], key
    ref_pod, our_pod = ref["template"]["spec"], ours["template"]["spec"]
    assert our_pod["nodeSelector"] == ref_pod["nodeSelector"]
    (ref_c,), (our_c,) = ref_pod["containers"], our_pod["containers"]
    for kind in ("requests", "limits"):
        assert str(our_c["resources"][kind]["google.com/tpu"]) == str(
            ref_c["resources"][kind]["google.com/tpu"]
        )
    ref_env = _env(ref_c)
    if "ENABLE_PJRT_COMPATIBILITY" in ref_env:
        assert _env(our_c)["ENABLE_PJRT_COMPATIBILITY"] == ref_env["ENABLE_PJRT_COMPATIBILITY"]
    ref_ports = {
        (p["name"], p["containerPort"])
        for p in ref_cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"]
        if p["name"] in ("dashboard", "client")
    }
    our_ports = {
        (p["name"], p["containerPort"])
        for p in ours_cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"]
    }
    assert ref_ports <= our_ports


# The Saxml tutorial: model servers as a JobSet, one replicated Job per v5e 4x8 slice (8 hosts x
# 4 chips), exclusive per node pool, host networking; an admin server and an HTTP server behind a
# LoadBalancer on 8888; state under gs://<bucket>/sax-root.
SAX_ROOT = f"gs://{BUCKET}/sax-root"
SAXML_JOBSET = {
    "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"},
    "failurePolicy": {"maxRestarts": 4},
    "replicas": 2,
    "parallelism": 8,
    "completions": 8,
    "backoffLimit": 0,
    "nodeSelector": {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
        "cloud.google.com/gke-tpu-topology": "4x8",
    },
    "hostNetwork": True,
    "dnsPolicy": "ClusterFirstWithHostNet",
    "args": ["--port=10001", "--sax_cell=/sax/test", "--platform_chip=tpuv5e"],
    "ports": [8471, 10001],
    "env": {"SAX_ROOT": SAX_ROOT, "MEGASCALE_NUM_SLICES": ""},
    "limits": {"google.com/tpu": "4"},
}
SAXML_SERVERS = {  # component: (port, env, image)
    "saxml-admin": (
        10000,
        {"GSBUCKET": BUCKET},
        "us-docker.pkg.dev/cloud-tpu-images/inference/sax-admin-server:v1.1.0",
    ),
    "saxml-http": (
        8888,
        {"SAX_ROOT": SAX_ROOT},
        "us-docker.pkg.dev/cloud-tpu-images/inference/sax-http:v1.0.0",
    ),
}


def test_saxml_objects_match_the_saxml_tutorial():
    # The tutorial's model servers use the host network; the chart's are off it unless asked.
    docs = render(
        REPO / "values" / "v5e-32-saxml.yaml", "--set", "saxml.modelServer.hostNetwork=true"
    )
    (jobset,) = by_kind(docs, "JobSet")
    (rj,) = jobset["spec"]["replicatedJobs"]
    job = rj["template"]["spec"]
    pod = job["template"]["spec"]
    (c,) = pod["containers"]
    assert {
        "annotations": jobset["metadata"]["annotations"],
        "failurePolicy": jobset["spec"]["failurePolicy"],
        "replicas": rj["replicas"],
        "parallelism": job["parallelism"],
        "completions": job["completions"],
        "backoffLimit": job["backoffLimit"],
        "nodeSelector": pod["nodeSelector"],
        "hostNetwork": pod["hostNetwork"],
        "dnsPolicy": pod["dnsPolicy"],
        "args": c["args"],
        "ports": sorted(p["containerPort"] for p in c["ports"]),
        "env": _env(c),
        "limits": {k: str(v) for k, v in c["resources"]["limits"].items()},
    } == SAXML_JOBSET

    deployments = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d
        for d in by_kind(docs, "Deployment")
    }
    for component, (port, env, image) in SAXML_SERVERS.items():
        (ours,) = deployments[component]["spec"]["template"]["spec"]["containers"]
        assert ([p["containerPort"] for p in ours["ports"]], _env(ours), ours["image"]) == (
            [port],
            env,
            image,
        ), component
    (svc,) = by_kind(docs, "Service")
    assert svc["spec"]["type"] == "LoadBalancer"
    assert [(p["port"], p["protocol"]) for p in svc["spec"]["ports"]] == [(8888, "TCP")]
