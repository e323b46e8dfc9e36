"""The rendered objects match the seeds' hand-written manifests in every field that matters for
scheduling, mounts and env (../shared/k8s/reference)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.chart.helm import REPO, by_kind, render

pytestmark = pytest.mark.chart
REFERENCE = REPO.parent / "shared" / "k8s" / "reference"
assert REFERENCE.is_dir(), f"{REFERENCE} is missing: the seeds' manifests live in ../shared/k8s"


def _load(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _env(container: dict) -> dict:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def _scheduling(template: dict) -> dict:
    """What decides where a pod runs and what it sees: selectors, TPU and memory, env, mounts."""
    spec = template["spec"]
    (c,) = spec["containers"]
    csi = {v["name"]: v["csi"] for v in spec["volumes"] if "csi" in v}
    return {
        "nodeSelector": {k: str(v) for k, v in spec.get("nodeSelector", {}).items()
                         if k.startswith("cloud.google.com/gke-tpu")},
        "tpu": {k: str(v.get("google.com/tpu")) for k, v in c["resources"].items()},
        "memory": {k: str(v.get("memory")) for k, v in c["resources"].items()},
        "env": {k: v for k, v in _env(c).items()
                if k in ("JAX_PLATFORMS", "ENABLE_PJRT_COMPATIBILITY")},
        "mounts": sorted((m["name"], m["mountPath"]) for m in c["volumeMounts"]),
        "csi": {k: (v["driver"], v["volumeAttributes"]["bucketName"]) for k, v in csi.items()},
        "implicit_dirs": all("implicit-dirs" in v["volumeAttributes"]["mountOptions"]
                             for v in csi.values()),
        "shm": [v["emptyDir"]["medium"] for v in spec["volumes"] if v["name"] == "dshm"],
        "annotations": {k: v for k, v in template["metadata"].get("annotations", {}).items()
                        if k.startswith("gke-gcsfuse/")},
    }


def test_v6e_16_raycluster_matches_the_seed():
    ref_text = (REFERENCE / "kuberay" / "gke-samples-maxtext-tpu-cluster.tpu-v6e-16.yaml"
                ).read_text().replace("${GS_BUCKET}", "ckpt-bucket")
    (ref,) = [d for d in yaml.safe_load_all(ref_text) if d]
    (ours,) = by_kind(render(REPO / "values" / "v6e-16.yaml"), "RayCluster")
    (ref_group,), (our_group,) = ref["spec"]["workerGroupSpecs"], ours["spec"]["workerGroupSpecs"]
    for key in ("groupName", "replicas", "numOfHosts"):
        assert our_group[key] == ref_group[key], key
    assert _scheduling(our_group["template"]) == _scheduling(ref_group["template"])
    ref_head = ref["spec"]["headGroupSpec"]["template"]
    our_head = ours["spec"]["headGroupSpec"]["template"]
    assert _scheduling(our_head) == _scheduling(ref_head)
    ports = lambda t: sorted((p["name"], p["containerPort"])  # noqa: E731
                             for p in t["spec"]["containers"][0]["ports"])
    assert ports(our_head) == ports(ref_head)
    assert (our_head["spec"]["containers"][0]["resources"]
            == ref_head["spec"]["containers"][0]["resources"])


def test_saxml_objects_match_the_seed():
    bucket = "ckpt-bucket"
    refs = {d["kind"] + "/" + d["metadata"]["name"]: d for f in (REFERENCE / "saxml").glob("*.yaml")
            for d in _load(f)}
    docs = render(REPO / "values" / "v5e-32-saxml.yaml")
    (jobset,) = by_kind(docs, "JobSet")
    ref_js = refs["JobSet/sax-model-server-set"]
    (rj,), (ref_rj,) = jobset["spec"]["replicatedJobs"], ref_js["spec"]["replicatedJobs"]
    assert rj["replicas"] == ref_rj["replicas"] == 2
    for key in ("parallelism", "completions", "backoffLimit"):
        assert rj["template"]["spec"][key] == ref_rj["template"]["spec"][key], key
    assert jobset["spec"]["failurePolicy"] == ref_js["spec"]["failurePolicy"]
    assert jobset["metadata"]["annotations"] == ref_js["metadata"]["annotations"]
    pod, ref_pod = (r["template"]["spec"]["template"]["spec"] for r in (rj, ref_rj))
    for key in ("nodeSelector", "hostNetwork", "dnsPolicy"):
        assert pod[key] == ref_pod[key], key
    (c,), (ref_c,) = pod["containers"], ref_pod["containers"]
    assert c["args"] == ref_c["args"]
    assert sorted(p["containerPort"] for p in c["ports"]) == sorted(
        p["containerPort"] for p in ref_c["ports"])
    ref_env = {k: v.replace("BUCKET_NAME", bucket) for k, v in _env(ref_c).items()}
    assert _env(c) == ref_env  # SAX_ROOT, and MEGASCALE_NUM_SLICES unset ("")
    assert {k: str(v) for k, v in c["resources"]["limits"].items()} == {
        k: str(v) for k, v in ref_c["resources"]["limits"].items()}

    deployments = {d["metadata"]["labels"]["app.kubernetes.io/component"]: d
                   for d in by_kind(docs, "Deployment")}
    for component, ref_name, port in (("saxml-admin", "sax-admin-server", 10000),
                                      ("saxml-http", "sax-http", 8888)):
        (ours,) = deployments[component]["spec"]["template"]["spec"]["containers"]
        (ref_c,) = refs[f"Deployment/{ref_name}"]["spec"]["template"]["spec"]["containers"]
        assert [p["containerPort"] for p in ours["ports"]] == [port]
        assert _env(ours) == {k: v.replace("BUCKET_NAME", bucket) for k, v in _env(ref_c).items()}
        assert ours["image"] == ref_c["image"]
    (svc,) = by_kind(docs, "Service")
    ref_svc = refs["Service/sax-http-lb"]
    assert svc["spec"]["type"] == ref_svc["spec"]["type"] == "LoadBalancer"
    assert [(p["port"], p["protocol"]) for p in svc["spec"]["ports"]] == [
        (p["port"], p["protocol"]) for p in ref_svc["spec"]["ports"]]
