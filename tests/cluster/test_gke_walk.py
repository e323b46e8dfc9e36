"""The README's GKE road, walked in order: `gke plan` (its script run as printed), `gke up`,
`image`, `install`, `submit`, `list`, `gke down`.

GKE, Artifact Registry, Cloud Build and Cloud Storage cannot run here. They are a FAKE gcloud
(tests/support/fake_gcloud.py: their state in a file, their refusals), and the cluster the fake
"creates" is the test control plane: `get-credentials` writes its context under GKE's name,
and the nodes GKE would start for each node pool `gke up` created are kwok nodes with GKE's
labels, taints and allocatable. Everything past gcloud is real: helm, the API server, the
scheduler, KubeRay. The walk then checks that the world is consistent: the image pushed is the
image every Ray pod pulls; the real scheduler places every pod on a pool `gke up` created, with
room for it and the GKE metadata server where the pod mounts the bucket; the bucket granted is
the bucket mounted, to the account the pods run as; `gke down` removes what `gke up` made.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import pykube
import pytest

from ci.cluster import gke_nodes
from harness.helm import CHART
from harness.kube import Release, dump, ready, wait_for
from harness.local_ray import tpu_launcher
from harness.paths import REPO
from launcher.client.gke.release import room
from launcher.client.release.image_tag import of_checkout
from launcher.core.tpu.table import (
    GENERATIONS,
    GKE_ACCELERATOR_LABEL,
    GKE_TOPOLOGY_LABEL,
    topology_chips,
)
from tests.support import fake_gcloud
from tests.support.fake_gcloud import BUCKET, CLUSTER, LOCATION, PROJECT

pytestmark = pytest.mark.cluster

# The image is tagged by the checkout's content: what gke up built is what the release pulls.
IMAGE = f"us-east5-docker.pkg.dev/my-proj/tpu-stack/launcher:{of_checkout(REPO).tag(CHART)}"
CHART_REPO = "oci://us-east5-docker.pkg.dev/my-proj/tpu-stack"  # the chart beside the image
POOL_LABEL = "cloud.google.com/gke-nodepool"


def _labels_of_pool(pool: dict) -> tuple[dict, int]:
    """The labels GKE puts on a node of `pool` and its TPU chips (0: a CPU machine)."""
    for gen in GENERATIONS.values():
        for chips, machine in gen.machines.items():
            if machine == pool["machineType"]:
                topology = pool.get("tpuTopology") or next(
                    t for t in gen.topologies if topology_chips(t) == chips
                )
                labels = {GKE_ACCELERATOR_LABEL: gen.gke_accelerator, GKE_TOPOLOGY_LABEL: topology}
                return labels, chips
    return {}, 0


def start_the_pools_nodes(release: Release, state: dict) -> None:
    """The nodes GKE starts for each node pool of the fake's cluster, with what GKE leaves
    pods on them (allocatable less its own DaemonSets)."""
    cluster = state["clusters"][f"{PROJECT}/{LOCATION}/{CLUSTER}"]
    suffix = release.namespace.rsplit("-", 1)[1]
    for pool in cluster["nodePools"].values():
        labels, chips = _labels_of_pool(pool)
        cpu, mem = room(pool["machineType"])
        for i in range(pool["nodes"]):
            name = f"{pool['name']}-{suffix}-{i}"
            if name in release.nodes:  # started for an earlier release
                continue
            node = gke_nodes.node(name, pool["name"], pool["machineType"], labels, chips)
            node["status"]["allocatable"].update({"cpu": f"{cpu:.3f}", "memory": f"{mem:.3f}Gi"})
            pykube.Node(release.api, node).create()
            release.nodes.append(name)


def test_the_gke_road_from_an_empty_project(gke: dict, release: Release, tmp_path: Path):
    state_file = tmp_path / "gke-state.json"
    user = functools.partial(tpu_launcher, env=gke, timeout=300)  # their shell, their commands
    values = str(REPO / "values" / "v6e-16.yaml")
    where = ["--values", values, "--release", release.name, "--namespace", release.namespace]
    common = [*where, "--chart", str(CHART)]  # and their helm (Helm 3; the fake's registry)

    # 1. The plan, pasted into a shell as printed: it makes everything on an empty project.
    plan = user("gke", "plan", *common)
    assert plan.returncode == 0, plan.stderr
    script = tmp_path / "plan.sh"
    script.write_text(plan.stdout)
    ran = subprocess.run(["bash", str(script)], env=gke, text=True, capture_output=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    state = json.loads(state_file.read_text())
    pools = state["clusters"][f"{PROJECT}/{LOCATION}/{CLUSTER}"]["nodePools"]
    made_pools = set(pools)
    assert made_pools == {"default-pool", "tpu-cpu", "tpu-ray-v6e-16-0"}
    assert list(state["images"]) == [IMAGE]
    assert state["buckets"][BUCKET]["location"] == "us-east5"

    # 2. gke up after it: every step finds its work done (credentials and the binding rerun).
    calls_before = len(state["calls"])
    up = user("gke", "up", *common)
    assert up.returncode == 0, up.stdout + up.stderr
    # The APIs' 7, the build account and its staging bucket, and the chart's 3 too; the version
    # and metadata checks hold.
    assert up.stdout.count("done already, skipped") == 20, up.stdout
    new = json.loads(state_file.read_text())["calls"][calls_before:]
    assert not [c for c in new if {"create", "submit"} & set(c)], new

    # 3. `image` rebuilds what the release pulls: no Docker engine here, so Cloud Build.
    image = user("image", *common)
    assert image.returncode == 0, image.stdout + image.stderr
    assert f"image: {IMAGE}" in image.stdout and "cloud-build" in image.stdout
    builds = json.loads(state_file.read_text())["builds"]
    assert [b["image"] for b in builds] == [IMAGE, IMAGE]
    assert {b["source"] for b in builds} == {str(REPO)}  # the checkout: its Dockerfile

    # 4. GKE starts the pools' nodes; `install` puts the release on them.
    state = json.loads(state_file.read_text())
    start_the_pools_nodes(release, state)
    # From the chart `image` pushed beside the image (packaged for it), as a team installs it.
    assert f"{CHART_REPO}/tpu-stack:0.1.0" in json.loads(state_file.read_text())["charts"]
    install = user("install", *where, "--chart", f"{CHART_REPO}/tpu-stack")
    assert install.returncode == 0, install.stdout + install.stderr
    assert "placeholder" not in install.stdout  # NOTES warn only about the chart's default
    assert "enforced only where the cluster enforces NetworkPolicy" in install.stdout  # NOTES
    pushed_digest = json.loads(state_file.read_text())["images"][IMAGE]["image_summary"]["digest"]
    wait_for(
        "the RayCluster to become ready",
        lambda: ready(release.raycluster()),
        120,
        explain=lambda: dump(release.raycluster().get("status")) + "\n" + release.events(),
    )

    # The world is consistent.
    # The release's NetworkPolicies are enforced by the cluster gke up made (else stored and
    # ignored), and GKE's default add-ons are still on beside the release's.
    cluster = json.loads(state_file.read_text())["clusters"][f"{PROJECT}/{LOCATION}/{CLUSTER}"]
    policies = subprocess.run(
        [*release.kubectl(), "-n", release.namespace, "get", "networkpolicy", "-o", "name"],
        text=True, capture_output=True, check=True,
    ).stdout.split()  # fmt: skip
    assert policies, "the release has NetworkPolicies"
    assert fake_gcloud.enforces_network_policy(cluster), cluster
    addons = {k for k, v in cluster["addonsConfig"].items() if v.get("enabled")}
    assert {"httpLoadBalancingConfig", "horizontalPodAutoscalingConfig"} <= addons, addons
    rc = release.raycluster()
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]
    ray_pods = release.pods(**{"ray.io/cluster": rc["metadata"]["name"]})
    assert len(ray_pods) == 1 + 4
    pool_of = {
        n.name: n.labels[POOL_LABEL]
        for n in pykube.Node.objects(release.api)
        if n.name in release.nodes
    }
    for pod in ray_pods:
        spec = pod.obj["spec"]
        assert pod.obj["status"]["phase"] == "Running", dump(pod.obj["status"])
        # What was pushed, pinned by the digest the registry gave it, and pullable by the
        # nodes' account (kwok's nodes pull nothing: the FAKE registry says whether GKE's could).
        assert {c["image"] for c in spec["containers"]} == {f"{IMAGE}@{pushed_digest}"}
        assert fake_gcloud.pull_allowed(state, IMAGE)
        pool = pool_of[spec["nodeName"]]
        assert pool in made_pools  # a pool gke up made, with room for the pod
        if pod.obj["metadata"]["annotations"].get("gke-gcsfuse/volumes") == "true":
            assert pools[pool]["config"]["workloadMetadataConfig"]["mode"] == "GKE_METADATA"
    head_pod = next(p for p in ray_pods if p.labels["ray.io/node-type"] == "head")
    # The head's 8 CPU fit neither GKE's own e2-standard-4 nor a TPU host (tainted).
    assert pool_of[head_pod.obj["spec"]["nodeName"]] == "tpu-cpu"
    mounted = {v["csi"]["volumeAttributes"]["bucketName"] for v in head["volumes"] if "csi" in v}
    assert mounted == {BUCKET}
    subject = (
        f"principal://iam.googleapis.com/projects/{fake_gcloud.PROJECT_NUMBER}/locations/global/"
        f"workloadIdentityPools/{PROJECT}.svc.id.goog/subject/ns/{release.namespace}/sa/"
        f"{head['serviceAccountName']}"
    )
    assert {
        "resource": f"gs://{BUCKET}",
        "member": subject,
        "role": "roles/storage.objectUser",
    } in (state["bindings"])

    # 5. A job from a directory outside the checkout, with its own config: the launcher finds
    # the release, reads its token, lists what it ships and port-forwards to the head. Under
    # kwok no Ray runs, so that is as far as it goes: the failure must say so.
    work = tmp_path / "my-project"
    work.mkdir()
    (work / "my-model.yml").write_text(
        (REPO / "launcher" / "configs" / "tiny-llama.yml").read_text()
    )
    job = ["--tpu=v6e-16", "my-model.yml", "run_name=walk", "ici_fsdp_parallelism=16"]
    submit = user(
        "submit",
        "--release",
        release.name,
        "--namespace",
        release.namespace,
        "--skip-preflight",
        "--",
        *job,
        cwd=work,
    )
    out = submit.stdout + submit.stderr
    assert submit.returncode == 2, out
    assert "ships with the job" in out and "my-model.yml" in out
    assert "release 'tpu''s Ray head does not answer through its port-forward" in out, out
    # On the cluster the walk's variables name, as every call of the command was.
    context = f"gke_{PROJECT}_{LOCATION}_{CLUSTER}"
    assert (
        f"kubectl --context {context} -n {release.namespace} get pods -l ray.io/node-type=head"
        in out
    )
    assert out.startswith(f"cluster: {context} (CLUSTER_NAME={CLUSTER})") or (
        f"cluster: {context} (CLUSTER_NAME={CLUSTER})" in submit.stderr.splitlines()[0]
    ), submit.stderr

    # 6. The serving release beside it (docs/serving.md), in the same cluster: gke up adds its
    # pools, install puts it there. gke down of the training release then takes that release
    # and its pools only: the serving one keeps running, its pools, the cluster and the
    # repository it pulls from, and what holds them is named.
    serving = ["--values", str(REPO / "values" / "v6e-8-vllm.yaml"), "--release", "serve"]
    serving += ["--namespace", release.namespace]
    up = user("gke", "up", *serving, "--chart", str(CHART))
    assert up.returncode == 0, up.stdout + up.stderr
    start_the_pools_nodes(release, json.loads(state_file.read_text()))
    install = user("install", *serving, "--chart", f"{CHART_REPO}/tpu-stack")
    assert install.returncode == 0, install.stdout + install.stderr
    down = user("gke", "down", *common, "--yes")
    assert down.returncode == 0, down.stdout + down.stderr
    state = json.loads(state_file.read_text())
    left = state["clusters"][f"{PROJECT}/{LOCATION}/{CLUSTER}"]["nodePools"]
    # No CPU pool for the serving release: its one pod without TPUs is helm test's.
    assert sorted(left) == ["default-pool", "serve-vllm-v6e-8"], sorted(left)
    assert "kept, these node pools of others are in it" in down.stdout
    assert state["repositories"] and state["images"]
    assert release.helm("status", "serve", check=False).returncode == 0  # still installed
    assert release.helm("status", release.name, check=False).returncode != 0

    # 7. The serving release's gke down: the last of the cluster goes with it; the bucket and
    # its grant stay, and the image build's staging bucket (`gke down` says how to delete it).
    down = user("gke", "down", *serving, "--chart", str(CHART), "--yes")
    assert down.returncode == 0, down.stdout + down.stderr
    state = json.loads(state_file.read_text())
    assert state["clusters"] == {} and state["repositories"] == {} and state["images"] == {}
    assert sorted(state["buckets"]) == sorted([BUCKET, f"{PROJECT}_cloudbuild"])

    # 8. A kubectl that cannot reach its cluster (a deleted one, an expired login): the
    # launcher shows kubectl's own words, not "no RayCluster of release".
    unreachable = tmp_path / "unreachable-kubeconfig"
    unreachable.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
        "clusters: [{name: gone, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: gone, context: {cluster: gone, user: gone}}]\n"
        "users: [{name: gone, user: {token: x}}]\n"
    )
    env = {**gke, "KUBECONFIG": str(unreachable)}
    status = user("list", "--release", release.name, "--kube-context", "gone", env=env)
    said = status.stdout + status.stderr
    assert status.returncode != 0 and "127.0.0.1:1" in said and "refused" in said, said
    # The walk's variables still name the deleted cluster: refused, not sent to `gone`.
    status = user("list", "--release", release.name, env=env)
    assert status.returncode == 2 and "get-credentials ml" in status.stderr, status.stderr
    assert "127.0.0.1:1" not in status.stderr
    assert "no RayCluster" not in said
