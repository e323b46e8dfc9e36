"""A command that changes or reads a cluster acts on the one the user named, never kubectl's
current context silently: a platform team's kubeconfig holds staging and production, and the
terminal last touched staging. Here the kubeconfig's current context is `staging` (a server
nothing listens on: anything sent there fails loudly) and the README's variables
(CLUSTER_NAME, PROJECT_ID, LOCATION) name the GKE context of the test control plane, as
`gcloud container clusters get-credentials` names it. A kubectl and a helm on the PATH log
every call and hand it to the real ones (KubeRay, the API server: real)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.helm import CHART, helm
from harness.kube import Release, logging_wrapper
from harness.local_ray import tpu_launcher
from harness.paths import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

NAMED = "gke_my-proj_us-east5-b_ml"
GKE_VARS = {"CLUSTER_NAME": "ml", "PROJECT_ID": "my-proj", "LOCATION": "us-east5-b"}


def _two_cluster_kubeconfig(release: Release, path: Path) -> None:
    """The control plane's kubeconfig with its context renamed to GKE's name, beside a
    `staging` context (current) whose server refuses every connection."""
    config = yaml.safe_load(Path(release.kubeconfig).read_text())
    (context,) = config["contexts"]
    user = context["context"]["user"]
    config["clusters"].append({"name": "staging", "cluster": {"server": "https://127.0.0.1:9"}})
    config["contexts"] = [
        {"name": NAMED, "context": {**context["context"]}},
        {"name": "staging", "context": {"cluster": "staging", "user": user}},
    ]
    config["current-context"] = "staging"
    path.write_text(yaml.safe_dump(config))


@pytest.fixture
def two_clusters(release: Release, tmp_path: Path) -> dict:
    kubeconfig = tmp_path / "kubeconfig"
    _two_cluster_kubeconfig(release, kubeconfig)
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    logging_wrapper(release.kubectl()[0], bin_dir / "kubectl", log, prefix="kubectl ")
    helm_wrapper = logging_wrapper(str(helm(3)), bin_dir / "helm", log, prefix="helm ")
    env = release.kubectl_env()
    env.update(GKE_VARS, KUBECONFIG=str(kubeconfig), PATH=f"{bin_dir}:{env['PATH']}")
    env["LAUNCHER_STATE_DIR"] = str(tmp_path / "state")
    return {"env": env, "log": log, "helm": str(helm_wrapper)}


def _cluster_calls(log: Path) -> list[str]:
    """The calls that reach a server: kubectl's `config` and helm's `template` read files."""
    calls = log.read_text().splitlines() if log.exists() else []
    return [c for c in calls if not c.startswith(("kubectl config ", "helm template "))]


def test_install_submit_and_status_act_on_the_named_cluster(release: Release, two_clusters):
    env, log = two_clusters["env"], two_clusters["log"]
    where = ["--release", release.name, "--namespace", release.namespace]
    said = f"cluster: {NAMED} (CLUSTER_NAME=ml; kubectl's current context, staging, is not used)"

    install = tpu_launcher(
        "install", "-f", "v6e-16", *where, "--chart", str(CHART), "--helm", two_clusters["helm"],
        "--registry", "tpu-stack.local/test", "--bucket", "my-ckpts",
        env=env, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    assert install.stderr.startswith(said + "\n"), install.stderr
    assert release.raycluster()["metadata"]["labels"]["app.kubernetes.io/instance"] == release.name

    submit = tpu_launcher(
        "submit", *where, "--skip-preflight", "--no-wait", "--",
        "tiny-llama.yml", "run_name=named", "steps=2",
        env=env, cwd=REPO, timeout=240,
    )  # fmt: skip
    # kwok's head runs no Ray: the port-forward fails, on the named cluster's head Service.
    assert submit.returncode == 2, submit.stdout + submit.stderr
    assert submit.stderr.startswith(said + "\n"), submit.stderr
    assert "port-forward to service/" in submit.stderr and "127.0.0.1:9" not in submit.stderr

    status = tpu_launcher("status", *where, env=env, cwd=REPO, timeout=240)
    assert status.stderr.startswith(said + "\n"), status.stderr
    assert "127.0.0.1:9" not in status.stdout + status.stderr

    calls = _cluster_calls(log)
    assert any(c.startswith("helm upgrade --install") for c in calls), calls
    assert sum(c.startswith("kubectl ") for c in calls) >= 4, calls  # secret, release, forward
    for call in calls:  # every one pinned to the named cluster: none reached staging
        assert f"--context {NAMED}" in call or f"--kube-context {NAMED}" in call, call


def test_a_named_cluster_without_credentials_is_refused_before_any_call(
    release: Release, two_clusters
):
    env, log = two_clusters["env"], two_clusters["log"]
    env["CLUSTER_NAME"] = "prod"  # named, with no context in the kubeconfig
    where = ["--release", release.name, "--namespace", release.namespace]
    for command in (
        ["install", "-f", "v6e-16", "--chart", str(CHART), "--helm", two_clusters["helm"],
         "--registry", "tpu-stack.local/test", "--bucket", "my-ckpts"],
        ["submit", "--skip-preflight", "--no-wait", "--", "tiny-llama.yml", "run_name=r"],
        ["status"],
    ):  # fmt: skip
        proc = tpu_launcher(*command[:1], *where, *command[1:], env=env, cwd=REPO, timeout=240)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        err = proc.stderr
        assert "CLUSTER_NAME=prod names GKE cluster prod" in err, err
        assert "current context is staging" in err, err
        fix = (
            "gcloud container clusters get-credentials prod --location us-east5-b --project my-proj"
        )
        assert fix in err, err
    assert _cluster_calls(log) == []
    # --kube-context names the cluster outright, whatever the variables say.
    proc = tpu_launcher("status", *where, "--kube-context", NAMED, env=env, cwd=REPO, timeout=240)
    assert proc.stderr.startswith(f"cluster: {NAMED} (--kube-context)\n"), proc.stderr
    assert all(f"--context {NAMED}" in c for c in _cluster_calls(log))
