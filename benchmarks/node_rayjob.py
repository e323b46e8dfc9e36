"""The node tier's figures (tests/node): the launcher image's size layer by layer (what every
GKE host pulls), and a RayJob's time from `tpu-launcher install` to its first step on the
node, split into the pod's start, Ray's start and the job's own start-up.

    .venv/bin/python benchmarks/node_rayjob.py      # root; brings the node up if it is down

The image is built once per content (ci/node/launcher_image.py); a first build's time is in
its report. One run: the machine's other load shows in every figure."""

from __future__ import annotations

import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

from harness.node import RUN, NodeCluster, build_launcher_image, follow_rayjob, node


def main() -> int:
    if node("status").returncode != 0 and (up := node("up")).returncode != 0:
        sys.exit(f"the node did not come up:\n{up.stdout}{up.stderr}")
    built = build_launcher_image()
    if built.returncode != 0:
        sys.exit(built.stdout + built.stderr)
    print(built.stdout)
    cluster = NodeCluster.running()
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    cluster.namespace(namespace)
    with tempfile.TemporaryDirectory() as tmp:
        env = cluster.user_env(Path(tmp), Path(tmp) / "state")
        job = ["tiny-llama.yml", "steps=5", "checkpoint_period=5", "run_name=bench"]
        values = Path(tmp) / "job.yaml"
        values.write_text(json.dumps({"ray": {"job": {"enabled": True, "args": job}}}))
        started = time.monotonic()
        install = cluster.install(
            env, namespace, f"bench-{uuid.uuid4().hex[:8]}", "--values", str(values)
        )
        if install.returncode != 0:
            sys.exit(install.stdout + install.stderr)
        installed = time.monotonic() - started
        t = follow_rayjob(cluster, namespace, "tpu-ray")
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    print(
        f"RayJob {t['status'].get('jobStatus')}: install {installed:.1f} s, then to its first step "
        f"{t['to_first_step_s']:.1f} s = pod start {t['pod_start_s']:.1f} s + Ray's start "
        f"{t['ray_start_s']:.1f} s + the job's start-up {t['job_start_s']:.1f} s"
    )
    (RUN / "rayjob-start.json").write_text(json.dumps({"install_s": installed, **t}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
