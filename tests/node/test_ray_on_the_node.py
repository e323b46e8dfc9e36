"""The chart's Ray cluster in real pods on the node: installed as a user does (`tpu-launcher
install`, the `cpu` preset: a head and two hosts of a simulated slice), with the launcher image
built here from its Dockerfile (on a STAND-IN Ray base: ci/node/images.py), the release's
NetworkPolicies enforced, and the bucket a STAND-IN for gcsfuse's CSI driver (a directory per
bucket, shared by the pods that mount it: ci/node/bucket-csi). What is real: the containers
under the chart's security context, KubeRay's commands, Ray's hosts finding each other through
the Services and cluster DNS, Ray's token, helm test, `submit --release` and MaxText training
on the pods' CPUs, checkpoints in the bucket volume, a resubmission resuming from them."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import pytest

from harness.local_ray import tpu_launcher
from harness.node import BUCKETS, NodeCluster, follow_rayjob

pytestmark = pytest.mark.node

JOB = ["tiny-llama.yml", "checkpoint_period=5", "log_period=5", "run_name=node1"]


@pytest.fixture(scope="module")
def ray_release(node_cluster: NodeCluster, launcher_image: str, user_env) -> Iterator[dict]:
    namespace = f"ray-{uuid.uuid4().hex[:6]}"
    bucket = f"node-{uuid.uuid4().hex[:8]}"
    node_cluster.namespace(namespace)
    where = ["--release", "tpu", "--namespace", namespace]
    install = node_cluster.install(user_env, namespace, bucket)
    assert install.returncode == 0, install.stdout + install.stderr
    node_cluster.wait(
        "the Ray cluster's head and two hosts to be ready",
        lambda: node_cluster.ready_ray_pods(namespace) == 3,
        timeout=600,
        explain=lambda: node_cluster.describe(namespace),
    )
    yield {"namespace": namespace, "bucket": BUCKETS / bucket, "where": where}
    node_cluster.uninstall(user_env, namespace)


def test_helm_test_passes_in_real_pods(ray_release, node_cluster: NodeCluster, user_env):
    """The chart's own check, in its pod: the head answers with the token and every host of
    the slice joined (Ray's hosts found the head through its Service and cluster DNS)."""
    proc = node_cluster.helm_test(user_env, ray_release["namespace"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Succeeded" in proc.stdout


def test_submit_trains_to_the_end_and_a_resubmission_resumes(ray_release, user_env):
    where = ray_release["where"]
    first = tpu_launcher("submit", *where, "--", *JOB, "steps=10", env=user_env, timeout=1200)
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-3000:]
    checkpoints = ray_release["bucket"] / "node1" / "checkpoints"
    steps = sorted(int(p.name) for p in checkpoints.iterdir() if p.name.isdigit())
    assert steps and steps[-1] == 9, (steps, first.stdout[-3000:])
    again = tpu_launcher("submit", *where, "--", *JOB, "steps=15", env=user_env, timeout=1200)
    assert again.returncode == 0, again.stdout[-6000:] + again.stderr[-3000:]
    resumed = re.search(r"\(resumed at step (\d+);", again.stdout)
    assert resumed and int(resumed[1]) in (9, 10), again.stdout[-4000:]  # after step 9's save
    steps = sorted(int(p.name) for p in checkpoints.iterdir() if p.name.isdigit())
    assert steps[-1] == 14, steps


def test_the_dashboard_is_closed_to_a_pod_outside_the_release(
    ray_release, node_cluster: NodeCluster, namespace: str
):
    """From another namespace: refused by the release's NetworkPolicy; with the policies taken
    out, the connection is made and Ray's token refuses it (401)."""
    ns = ray_release["namespace"]
    head = json.loads(
        node_cluster.kubectl("-n", ns, "get", "pods", "-l", "ray.io/node-type=head", "-o", "json")
    )["items"][0]
    dashboard = f"{head['status']['podIP']}:8265"
    seen, said = node_cluster.http_status(namespace, "outside", dashboard, "/api/jobs/")
    assert seen == "no-answer", said
    with node_cluster.without_policies(ns):
        seen, said = node_cluster.once_policies_are_out(namespace, "open", dashboard, "/api/jobs/")
        assert seen == "refused-by-server", said


def test_a_rayjob_runs_its_job_and_gives_its_cluster_back(
    node_cluster: NodeCluster, launcher_image: str, user_env, namespace: str, tmp_path
):
    """KubeRay's submitter submits the job through the release's policy, the operator follows it
    to SUCCEEDED and deletes the job's cluster: the slices are held only while it runs."""
    bucket = f"node-{uuid.uuid4().hex[:8]}"
    job = {"ray": {"job": {"enabled": True, "args": [*JOB[:-1], "steps=5", "run_name=job1"]}}}
    values = tmp_path / "job.yaml"  # a team's RayJob values, beside the preset
    values.write_text(json.dumps(job))
    install = node_cluster.install(user_env, namespace, bucket, "--values", str(values))
    assert install.returncode == 0, install.stdout + install.stderr
    timeline = follow_rayjob(node_cluster, namespace, "tpu-ray")
    print("RayJob start:", json.dumps(timeline))
    assert timeline["status"]["jobStatus"] == "SUCCEEDED", timeline
    assert timeline["to_first_step_s"], timeline  # its progress reached the submitter's log
    node_cluster.wait(
        "KubeRay to delete the job's RayCluster",
        lambda: (
            not json.loads(
                node_cluster.kubectl("-n", namespace, "get", "rayclusters", "-o", "json")
            )["items"]
        ),
        timeout=180,
    )
    node_cluster.wait(
        "the job cluster's pods to be gone",
        lambda: (
            not [
                p
                for p in node_cluster.pods(namespace)
                if p["metadata"]["labels"].get("app.kubernetes.io/name") == "kuberay"
            ]
        ),
        timeout=180,
    )
    # Its pods are gone and their volumes unmounted: the checkpoints are still in the bucket.
    steps = sorted(
        int(p.name)
        for p in (BUCKETS / bucket / "job1" / "checkpoints").iterdir()
        if p.name.isdigit()
    )
    assert steps[-1] == 4, steps  # steps 0 and 4 (checkpoint_period=5)
