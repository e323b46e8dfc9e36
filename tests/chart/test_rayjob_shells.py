"""A RayJob's arguments reach the launcher whole, through every shell on their way: the chart
quotes them into the RayJob's entrypoint; KubeRay's submitter joins its `ray job submit` command
into one `/bin/bash -ce` script (KubeRay v1.6.2, controllers/ray/common/job.go
BuildJobSubmitCommand and rayjob_controller.go configureSubmitterContainer); Ray's own CLI
(`ray job submit`, run here for real) joins the words after `--` with shlex.join; and Ray's
job supervisor runs that with a shell (subprocess.Popen(shell=True)). Two stand-ins, named:
the dashboard the CLI would send the job to (the entrypoint is run at once, as the supervisor
would), and `python`, which prints the arguments it got instead of starting the launcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from harness.helm import BUCKET, by_kind, render

pytestmark = pytest.mark.chart

ARGS = ["base.yml", "run_name=a;b", "x=$(touch pwned)", "y=`touch pwned2`", "z='q\"t'",
        "w=two  words", "v=$HOME", "u=a\\b"]  # fmt: skip
ADDRESS, JOB = "http://tpu-head-svc:8265", "tpu-ray-x7k2p"

# `ray`: Ray's real CLI, with its dashboard client standing in (the job's entrypoint is run as
# Ray's job supervisor runs it, with a shell); `ray job status` answers "no such job" so the
# submitter submits, and `ray job logs` has nothing to follow.
RAY = """\
import subprocess, sys
from ray.dashboard.modules.job import cli

class Dashboard:  # stands in for Ray's dashboard
    def submit_job(self, *, entrypoint, submission_id=None, **_):
        subprocess.run(entrypoint, shell=True, check=True)  # the job supervisor's way
        return submission_id

    def get_version(self):
        return "1"

args = sys.argv[1:]
if args[:2] == ["job", "status"]:
    sys.exit(1)
if args[:2] == ["job", "logs"]:
    sys.exit(0)
cli._get_sdk_client = lambda *a, **k: Dashboard()
cli.job_cli_group.main(args[1:], prog_name="ray job")
"""
# `python`: prints the arguments the entrypoint gave it, where the test reads them.
PYTHON = "import json, os, sys\nopen(os.environ['ARGV_OUT'], 'w').write(json.dumps(sys.argv[1:]))\n"


def kuberay_submitter_script(entrypoint: str) -> str:
    """KubeRay's K8sJobMode submitter command, word for word, joined by spaces as it joins it."""
    words = [
        "if", "!", "ray", "job", "status", "--address", ADDRESS, JOB, ">/dev/null", "2>&1", ";",
        "then", "ray", "job", "submit", "--address", ADDRESS, "--no-wait",
        "--submission-id", JOB, "--", entrypoint.strip(), ";",
        "fi", ";", "ray", "job", "logs", "--address", ADDRESS, "--follow", JOB,
    ]  # fmt: skip
    return " ".join(words)


def test_every_argument_arrives_whole_and_nothing_in_it_runs(tmp_path):
    docs = render(None, *BUCKET, "--set", "ray.job.enabled=true", "--set-json",
                  f"ray.job.args={json.dumps(ARGS)}")  # fmt: skip
    (rayjob,) = by_kind(docs, "RayJob")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("ray", RAY), ("python", PYTHON)):
        (bin_dir / name).write_text(f"#!{sys.executable}\n" + body)
        (bin_dir / name).chmod(0o755)
    out = tmp_path / "argv.json"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ARGV_OUT": str(out)}
    ran = subprocess.run(
        ["/bin/bash", "-ce", "--", kuberay_submitter_script(rayjob["spec"]["entrypoint"])],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert ran.returncode == 0, textwrap.shorten(ran.stdout + ran.stderr, 3000)
    assert json.loads(out.read_text()) == ["-m", "launcher.runtime", "train", *ARGS]
    assert not any(tmp_path.glob("pwned*"))  # $(...) and backticks were words, not commands
