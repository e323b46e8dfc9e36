"""`tpu-launcher submit --framework torch` and `demo --framework torch` on a workstation, up to
Ray's job API: what ships and what every host runs, and the refusals, each run in this process
as the console script runs it. The submission to a real cluster: tests/e2e/test_torch_job.py."""

from __future__ import annotations

import filecmp
import json
import shlex
from pathlib import Path

import pytest

from launcher.client.jobs import torch_submit as torch_submit
from launcher.client.local.instance import SLOT_ENV
from launcher.core.job.run_requests import TORCH_ENTRYPOINT
from tests.support.launcher_cli import tpu_launcher_here

pytestmark = pytest.mark.unit


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A user's directory with a project in it, the current directory."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)
    (tmp_path / "my-project" / "data").mkdir(parents=True)
    (tmp_path / "my-project" / "train.py").write_text("print('hi')\n")
    (tmp_path / "my-project" / "data" / "prep.py").write_text("print(1)\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "my-project"


def _submitted(out: str) -> list[str]:
    """The `ray job submit` command a dry run prints, as its words."""
    line = next(x for x in out.splitlines() if "ray job submit" in x)
    return shlex.split(line[line.index("ray job submit") :])


def test_the_script_is_named_from_here_and_runs_from_the_working_dir_on_every_host(project, capsys):
    code, out, err = tpu_launcher_here(
        capsys, "submit", "--framework", "torch", "--dry-run", "--working-dir", "my-project",
        "--", "--run_name=r", "my-project/train.py", "--lr", "3e-4",
    )  # fmt: skip
    assert code == 0, err
    words = _submitted(out)
    assert words[words.index("--working-dir") + 1] == str(project)
    assert json.loads(words[words.index("--metadata-json") + 1]) == {"run_name": "r"}
    entrypoint = words[words.index("--") + 1 :]
    assert entrypoint[: len(TORCH_ENTRYPOINT)] == list(TORCH_ENTRYPOINT)
    # The script as the hosts see it: inside the shipped directory, its arguments after it.
    assert entrypoint[-3:] == ["train.py", "--lr", "3e-4"], entrypoint
    assert "2 files" in out and "data/prep.py" in out, out


@pytest.mark.parametrize(
    ("working_dir", "script", "says", "fix"),
    [
        ("my-project", "train.py", "no file at", "its path from here: my-project/train.py"),
        ("my-project/data", "my-project/train.py", "is outside", "--working-dir"),
    ],
    ids=["a path from the working dir, not from here", "a script outside the working dir"],
)
def test_a_script_the_hosts_would_not_have_is_refused_with_the_fix(
    project, capsys, working_dir, script, says, fix
):
    code, _, err = tpu_launcher_here(
        capsys, "submit", "--framework", "torch", "--dry-run", "--working-dir", working_dir,
        "--", "--run_name=r", script,
    )  # fmt: skip
    assert code == 2, err
    assert says in err and fix in err and "Traceback" not in err, err


def test_the_torch_demo_ships_the_example_as_train_py_with_its_resume_arguments(
    project, monkeypatch
):
    """From a directory with no train.py (the clean clone's case the demo first failed in): the
    example ships alone, as train.py; Ray's job API is the one thing replaced (it records)."""
    sent: dict = {}

    def record(request, run_name, address, entrypoint, working_dir=None, **_):
        sent.update(run=run_name, entrypoint=entrypoint, files=sorted(working_dir.iterdir()))
        assert filecmp.cmp(working_dir / "train.py", torch_submit.EXAMPLE, shallow=False)
        return 0

    monkeypatch.setattr(torch_submit, "submit_entrypoint", record)
    # A slot no test starts a cluster in: the suite's own (slot 1), which an e2e test may have
    # started from the checkout meanwhile, is another directory's, and the demo refuses it.
    monkeypatch.setenv(SLOT_ENV, "8")
    assert torch_submit.demo(no_wait=True, verbose=False, script_args=["--lr", "1e-3"]) == 0
    assert sent["run"] == torch_submit.DEMO_RUN
    assert [p.name for p in sent["files"]] == ["train.py"]
    assert sent["entrypoint"][-7:] == ["train.py", *torch_submit.DEMO_ARGS, "--lr", "1e-3"]


def test_a_backend_no_slice_gives_is_refused_before_the_job_is_sent(project, capsys):
    """A torchrun script written for GPUs names NCCL: no slice of ours gives it, so submit
    refuses with the line to change, before Ray is asked anything (--dry-run or not)."""
    (project / "train.py").write_text(
        "import torch.distributed as dist\n\ndist.init_process_group(backend='nccl')\n"
    )
    code, out, err = tpu_launcher_here(
        capsys, "submit", "--framework", "torch", "--dry-run", "--working-dir", "my-project",
        "--", "--run_name=r", "my-project/train.py",
    )  # fmt: skip
    assert code == 2 and "ray job submit" not in out
    assert "my-project/train.py:3: init_process_group(backend='nccl')" in err
    assert "fix: line 3: call init_process_group() without a backend" in err
