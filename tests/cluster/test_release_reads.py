"""`submit --release` reads the release once: one kubectl call for its RayCluster and RayJob
(the slice, the grace, the image, the token's Secret name all come from that answer), one for
the token, one for the port-forward; counted by a kubectl on the PATH that logs each call and
hands it to the real one, against the test control plane's KubeRay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pykube
import pytest

from harness.kube import Release, logging_wrapper, wait_for
from harness.paths import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]


def counting_kubectl(release: Release, bin_dir: Path, log: Path) -> dict[str, str]:
    """The release's kubectl environment, with every call written to `log` first."""
    bin_dir.mkdir()
    logging_wrapper(release.kubectl()[0], bin_dir / "kubectl", log)
    env = release.kubectl_env()
    return {**env, "PATH": f"{bin_dir}:{env['PATH']}"}


def server_calls(log: Path) -> list[str]:
    """The logged calls that reach the API server (`kubectl config` reads the kubeconfig:
    which cluster the command acts on, launcher.client.kube_context)."""
    return [c for c in log.read_text().splitlines() if not c.startswith("config ")]


def test_submit_to_a_release_makes_three_kubectl_calls(release: Release, tmp_path: Path):
    release.install(REPO / "values" / "v6e-16.yaml")
    cluster = release.raycluster()["metadata"]["name"]
    wait_for(  # KubeRay makes the token's Secret as it reconciles the cluster
        "the release's token Secret",
        lambda: (
            pykube.Secret.objects(release.api)
            .filter(namespace=release.namespace)
            .get_or_none(name=cluster)
        ),
        60,
    )
    log = tmp_path / "kubectl.log"
    env = counting_kubectl(release, tmp_path / "bin", log)
    env["LAUNCHER_STATE_DIR"] = str(tmp_path / "state")
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", "submit", "--release", release.name,
         "--namespace", release.namespace, "--skip-preflight", "--no-wait", "--",
         "tiny-llama.yml", "run_name=reads", "steps=2"],
        text=True, capture_output=True, env=env, cwd=REPO, timeout=240,
    )  # fmt: skip
    # No head pod runs in the control plane: the port-forward, the last call, is what fails.
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"kubectl port-forward to service/{cluster}-head-svc failed" in proc.stderr
    assert "bound to v6e-16" in proc.stdout  # the slice came from the one read
    calls = server_calls(log)
    assert len(calls) == 3, calls
    assert "get raycluster,rayjob -l" in calls[0]
    assert f"get secret {cluster}" in calls[1]
    assert "port-forward" in calls[2]


def test_generate_asks_a_serving_release_with_the_key_its_pods_read(release: Release, tmp_path):
    """`generate --release` of a vLLM release: its server pods (which Secret holds the key),
    that Secret's key, its Service, the port-forward; the key itself never printed."""
    key = "not-printed-7d1f"
    subprocess.run(
        [*release.kubectl(), "-n", release.namespace, "create", "secret", "generic",
         "vllm-api-key", f"--from-literal=api-key={key}"],
        check=True, capture_output=True,
    )  # fmt: skip
    release.install(REPO / "values" / "v6e-8-vllm.yaml")
    wait_for(
        "the vLLM Deployment's pod",
        lambda: release.pods(**{"app.kubernetes.io/component": "vllm"}),
        60,
    )
    log = tmp_path / "kubectl.log"
    env = counting_kubectl(release, tmp_path / "bin", log)
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", "generate", "--release", release.name,
         "--namespace", release.namespace, "--prompt", "The capital of France is"],
        text=True, capture_output=True, env=env, cwd=REPO, timeout=120,
    )  # fmt: skip
    # No container runs in the control plane: the port-forward is what fails, last.
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "kubectl port-forward to service/tpu-vllm failed" in proc.stderr
    calls = server_calls(log)
    assert len(calls) == 4, calls
    assert "get secret vllm-api-key -o jsonpath={.data.api-key}" in calls[1]
    assert key not in proc.stdout + proc.stderr


def test_a_rayservice_release_reports_its_server_not_a_job_cluster(release: Release):
    """KubeRay makes a RayService's RayCluster with the release's labels: `status --release`
    reads the server (its pods on the slice, KubeRay's status), and `submit --release` does not
    take that cluster for a training release's."""
    values = REPO / "values" / "v6e-16-vllm.yaml"
    release.install(values)  # no TPU nodes: the slice's hosts stay Pending
    wait_for(
        "KubeRay's pods of the RayService",
        lambda: len(release.pods(**{"app.kubernetes.io/component": "vllm-worker"})) == 4,
        120,
        explain=release.events,
    )
    env = release.kubectl_env()
    where = ["--release", release.name, "--namespace", release.namespace]
    status = subprocess.run(
        [sys.executable, "-m", "launcher", "status", *where, "--json"],
        text=True, capture_output=True, env=env, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert status.returncode == 0, status.stdout + status.stderr
    found = json.loads(status.stdout.strip().splitlines()[-1])
    assert (found["kind"], found["stage"], found["pods"]) == ("RayService", "pending", 5)
    submit = subprocess.run(
        [sys.executable, "-m", "launcher", "submit", *where, "--skip-preflight", "--no-wait",
         "--", "tiny-llama.yml", "run_name=r"],
        text=True, capture_output=True, env=env, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert submit.returncode == 2, submit.stdout + submit.stderr
    assert "no RayCluster of release" in submit.stderr


def test_the_live_release_tells_its_jobs_what_its_values_say(release: Release, tmp_path: Path):
    """A release's facts read the third way (tests/chart/test_release_facts.py holds the render
    and the values equal): `Release.facts()` from the RayCluster KubeRay holds in the control
    plane, through kubectl, equals what its values files say and what its head's env gives the
    head's launcher."""
    from harness.helm import CHART, VALUES
    from launcher.core.release_facts import ReleaseFacts
    from launcher.core.values_file import load_values, release_facts

    extra = tmp_path / "elastic.yaml"
    extra.write_text(
        "ray:\n  worker:\n    terminationGracePeriodSeconds: 90\n"
        "    tpu:\n      minSlices: 1\n"
        "checkpoints:\n  tier: memory\n  memorySize: 40Gi\n"
        "cost:\n  region: us-east5\n"
    )
    values = [VALUES / "v6e-16-x2.yaml", extra]
    release.install(*values)
    read = subprocess.run(
        [sys.executable, "-c",
         "import sys; from launcher.client.release.helm_release import Release; "
         "print(Release.read(sys.argv[1], sys.argv[2]).facts().to_json())",
         release.name, release.namespace],
        text=True, capture_output=True, env=release.kubectl_env(), cwd=REPO, timeout=120,
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    live = ReleaseFacts.from_json(read.stdout.strip())
    merged = load_values(CHART / "values.yaml", *values)
    merged["global"]["gcsfuse"]["bucketName"] = release.values_args()[-1].split("=", 1)[1]
    assert live == release_facts(merged, release.name)
    head = release.raycluster()["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in head["env"] if "value" in e}
    assert ReleaseFacts.from_env(env) == live
    assert (live.min_slices, live.checkpoint_tier, live.grace_seconds) == (1, "memory", 90)
