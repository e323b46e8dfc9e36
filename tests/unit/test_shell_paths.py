"""A user's words reach a shell on three roads, and arrive whole on each, run through the same
shell the real component uses:

- a RayJob's `ray.job.args`: tests/chart/test_rayjob_shells.py (KubeRay's submitter's bash, Ray's
  CLI, the job supervisor's shell);
- `submit`, `generate` and `export`, which all send their entrypoint through Ray's job API
  (launcher.client.jobs.ray_api.RayJobs.submit), whose supervisor runs it with a shell:
  tests/unit/test_ray_jobs_api.py;
- `gke plan`, which prints a bash script of the steps `gke up` runs (launcher.client.gke.steps.
  format_plan): here, bash runs it for real, with `gcloud` a stand-in on PATH that records the
  arguments it got. (Saxml's calls go over HTTP as JSON: no shell.)

A control character in a job's argument is refused where the words arrive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.client.gke.steps import Check, Plan, Step, format_plan
from launcher.core.errors import UsageError
from launcher.core.job.plan import parse_job_args

pytestmark = pytest.mark.unit

NASTY = ["run_name=a;b", "x=$(touch pwned)", "y=`touch pwned2`", "z='q\"t'", "w=two  words",
         "v=$HOME", "u=a\\b", "t=*", "s=#c", "r=a|b&c>d"]  # fmt: skip


LISTING = ["printf", "%s\\n", "pool-a", "pool-2"]  # what a for_each step's listing prints


def _recorder(bin_dir: Path, name: str, out: Path) -> None:
    """`name` on PATH: appends the arguments it got, as one JSON line, to `out`."""
    script = bin_dir / name
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(out)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    script.chmod(0o755)


def _recorded(out: Path) -> list[list[str]]:
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    bin_dir, out = tmp_path / "bin", tmp_path / "argv.jsonl"
    bin_dir.mkdir()
    _recorder(bin_dir, "gcloud", out)
    monkeypatch.chdir(tmp_path)  # where a word that escaped would touch its file
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return env, out, tmp_path


def test_the_plan_script_runs_each_step_with_its_words_whole(stand_ins):
    env, out, cwd = stand_ins
    steps = [
        Step("the project's number", ["gcloud", "projects", "describe", "p"], capture_as="NUM"),
        Step("a step with a user's words", ["gcloud", "x", *NASTY, "--member=sa:${NUM}.svc"]),
        Step("each listed item", ["gcloud", "each", "{item}", "w=a;b"], for_each=LISTING),
        Step(
            "a step already done",
            ["gcloud", "never", "run"],
            done_if=Check(["gcloud", "check", "it's done"]),
        ),
    ]
    script = format_plan(Plan(steps, ["a note with a $(touch pwned3) in it"]))
    proc = subprocess.run(["bash", "-c", script], env=env, cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    recorded = _recorded(out)
    # The captured ${NUM} is what the first step printed: the recorder prints nothing.
    assert recorded == [
        ["projects", "describe", "p"],
        ["x", *NASTY, "--member=sa:.svc"],
        ["each", "pool-a", "w=a;b"],  # the loop's item, each listed word
        ["each", "pool-2", "w=a;b"],
        ["check", "it's done"],
    ]
    assert not list(cwd.glob("pwned*"))


def test_the_plans_conditions_and_files_keep_a_users_words_whole(stand_ins):
    """The plan's other shell paths: a file a later step reads (its path a user's words), a GKE
    version compared with sort -V, and a condition that fails, whose fix names a user's words:
    the file lands at that path, the version holds, and the script stops at the failed
    condition, echoing the words as they are, running nothing after it."""
    env, out, cwd = stand_ins
    path, content = "cfg dir/a;b $(touch pwned4).yaml", "kubeletConfig:\n  x: 1\n"
    newer = Check(["printf", "%s", "1.35.1-gke.9"], at_least="1.35.0-gke.1171000")
    older = Check(["printf", "%s", "1.32.4-gke.1"], at_least="1.35.0-gke.1171000")
    fix = " ".join(NASTY)
    steps = [
        Step("a file", [], writes=(path, content)),
        Step("new enough", [], done_if=newer, required=True, mismatch_fix="unused"),
        Step("too old", [], done_if=older, required=True, mismatch_fix=fix),
        Step("never reached", ["gcloud", "after"]),
    ]
    proc = subprocess.run(
        ["bash", "-c", format_plan(Plan(steps))], env=env, cwd=cwd, capture_output=True, text=True
    )
    assert proc.returncode == 1, proc.stderr
    assert (cwd / path).read_text() == content
    assert proc.stderr == f"error: too old: not so; fix: {fix}\n"
    assert not out.exists() and not list(cwd.glob("pwned*"))


@pytest.mark.parametrize("word", ["steps=5\n", "run_name=a\tb", "x=\x1b[31m"])
def test_a_control_character_in_a_jobs_argument_is_refused_where_it_arrives(word):
    with pytest.raises(UsageError, match="holds a control character") as err:
        parse_job_args(["base.yml", word])
    assert err.value.field == "job arguments"
