"""A PyTorch job's words (launcher.core.job.torch_plan): the job's flags before the script, the
script's own words after it, passed unchanged; what is missing or misplaced is refused with
the fix; the plan runs one worker per chip."""

from __future__ import annotations

import pytest

from launcher.core.errors import UsageError
from launcher.core.job.plan import JobOptions
from launcher.core.job.torch_plan import TorchJobSpec, TorchPlan
from launcher.core.tpu.slices import TpuSlices
from launcher.core.tpu.table import slice_shape

pytestmark = pytest.mark.unit


def test_the_scripts_own_flags_reach_it_unchanged():
    words = ["--run_name=r1", "--max-failures=1", "train.py", "--lr", "3e-4", "--run_name=x"]
    spec = TorchJobSpec.parse(words)
    assert (spec.script, spec.run_name, spec.max_failures) == ("train.py", "r1", 1)
    assert spec.script_args == ("--lr", "3e-4", "--run_name=x")
    assert TorchJobSpec.parse(spec.words()) == spec  # what the cluster's command reads back


def test_the_hang_watchdog_and_metrics_flags_are_a_maxtext_jobs():
    default = TorchJobSpec.parse(["--run_name=r", "t.py"])
    maxtext = JobOptions()  # the MaxText job's defaults (core.job_plan)
    assert (default.hang_timeout_s, default.hang_step_factor, default.max_hangs) == (
        maxtext.hang_timeout_s,
        maxtext.hang_step_factor,
        maxtext.max_hangs,
    )
    assert (default.max_failures, default.max_preemptions) == (
        maxtext.max_failures,
        maxtext.max_preemptions,
    )
    words = ["--run_name=r", "--hang_timeout_s=20", "--max-hangs=0", "--nometrics", "t.py"]
    spec = TorchJobSpec.parse(words)
    assert (spec.hang_timeout_s, spec.max_hangs, spec.metrics) == (20.0, 0, False)
    assert TorchJobSpec.parse(spec.words()) == spec


@pytest.mark.parametrize(
    ("words", "field", "fix"),
    [
        (["--run_name=r"], "torch job", "train.py [its arguments]"),
        (["--run_name=r", "train.sh"], "torch job", "train.py"),
        (["train.py"], "--run_name", "--run_name=train-1 train.py"),
        (["--run_name=r", "--lr=1", "train.py"], "--lr=1", "write it after train.py"),
        (["--run_name=r", "--max_failures=-2", "t.py"], "--max_failures", "-1 (no limit)"),
        (["--run_name=r", "--max_hangs=-3", "t.py"], "--max_hangs", "-1 (no limit)"),
        (["--run_name=r", "--hang_timeout_s=-1", "t.py"], "--hang_timeout_s", "0 (off)"),
    ],
)
def test_a_job_that_cannot_run_is_refused_with_the_fix(words, field, fix):
    with pytest.raises(UsageError) as e:
        TorchJobSpec.parse(words)
    assert e.value.field == field and fix in e.value.fix


def test_one_worker_per_chip_of_every_slice():
    spec = TorchJobSpec.parse(["--run_name=r", "t.py"])
    plan = TorchPlan(spec, TpuSlices(slice_shape("v5p", "2x2x2"), num_slices=2), "/bucket")
    assert (plan.workers_per_slice, plan.num_workers) == (8, 16)
    assert str(plan.run_dir.checkpoints) == "/bucket/r/checkpoints"
    assert plan.describe().endswith("16 PyTorch workers, one per chip (4 per host)")


def test_the_policy_flags_are_declared_once_and_read_by_both_frameworks():
    """One declaration per policy flag (core.job_flags.POLICY_FLAGS): MaxText's absl flags and
    the torch parser are built from it, with the same defaults and the same bounds."""
    from absl import flags

    from launcher.core.job.flags import POLICY_FLAGS, define_flags
    from launcher.core.job.plan import parse_job_args
    from launcher.core.job.torch_plan import _flags

    names = [flag.name for flag in POLICY_FLAGS]
    assert names == [
        "max_failures", "max_preemptions", "hang_timeout_s", "hang_step_factor", "max_hangs",
        "metrics", "price_per_chip_hour", "dry_run",
    ]  # fmt: skip
    fv = flags.FlagValues()
    define_flags(fv)
    torch = {a.dest: a for a in _flags()._actions}
    assert set(torch) == {"run_name", *names}
    maxtext, default = JobOptions(), TorchJobSpec.parse(["--run_name=r", "t.py"])
    for flag in POLICY_FLAGS:
        assert fv[flag.name].help == flag.help and fv[flag.name].default == flag.default
        assert getattr(maxtext, flag.name) == getattr(default, flag.name) == flag.default
        if flag.lower_bound is None:
            continue
        below = f"--{flag.name}={flag.lower_bound - 1}"
        with pytest.raises(UsageError):  # the MaxText job's absl bound
            parse_job_args([below, "base.yml"])
        with pytest.raises(UsageError) as e:
            TorchJobSpec.parse(["--run_name=r", below, "t.py"])
        assert e.value.field == f"--{flag.name}" and e.value.fix == flag.allowed


def test_a_script_reporting_no_steps_is_neither_said_to_start_at_zero_nor_to_restart_anew(
    tmp_path, capsys
):
    """A script of the team's own that saves through its own torch.distributed.checkpoint and
    reports nothing through TorchJob: the launcher cannot see its resumes, so the summary must
    not say it started from step 0 or that a resubmission starts it again."""
    from launcher.core.job.goodput import Attempt, breakdown, by_wall_time
    from launcher.core.job.outcome import Outcome, Start, Trained
    from launcher.runtime.job.summary import print_summary

    spec = TorchJobSpec.parse(["--run_name=r", "t.py"])
    # As the driver hands it over: no step clock, so the script's 30 s of the job's 60 s.
    goodput = by_wall_time(breakdown([Attempt(started_at=5.0)], 0.0, 60.0), 30.0)
    plan = TorchPlan(spec, TpuSlices(slice_shape("v5p", "2x2x2"), num_slices=1), str(tmp_path))
    start = Start(
        slices=1, workers=4, first_step=None, last_step=None, seconds_to_first_step=None,
        batch_tokens=[], megascale={}, capacity=None, restored_from=None, timeline=None,
    )  # fmt: skip
    outcome = Outcome(
        goodput=goodput, compile_cache={}, saves={}, starts=[start], restarts=[],
        trained=Trained(0, 0), evals=[], no_cost="no price",
    )  # fmt: skip
    print_summary(plan, {"script_seconds": 30.0}, 60.0, outcome)
    out = capsys.readouterr().out
    assert "its steps are not reported to the launcher" in out
    assert "started from step 0" not in out and "runs it again from its start" not in out
    assert "resume:       not known to the launcher" in out
    assert "goodput:      50% of 60s wall time by wall time: the script ran 30s" in out
