"""`submit --release` reads the release once: one kubectl call for its RayCluster and RayJob
(the slice, the grace, the image, the token's Secret name all come from that answer), one for
the token, one for the port-forward; counted by a kubectl on the PATH that logs each call and
hands it to the real one, against the test control plane's KubeRay."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pykube
import pytest

from harness.kube import Release, wait_for
from harness.paths import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]


def counting_kubectl(release: Release, bin_dir: Path, log: Path) -> dict[str, str]:
    """The release's kubectl environment, with every call written to `log` first."""
    real = release.kubectl()[0]
    bin_dir.mkdir()
    wrapper = bin_dir / "kubectl"
    wrapper.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    env = release.kubectl_env()
    return {**env, "PATH": f"{bin_dir}:{env['PATH']}"}


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
    calls = log.read_text().splitlines()
    assert len(calls) == 3, calls
    assert "get raycluster,rayjob -l" in calls[0]
    assert f"get secret {cluster}" in calls[1]
    assert "port-forward" in calls[2]
