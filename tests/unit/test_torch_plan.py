"""A PyTorch job's words (launcher.core.torch_plan): the job's flags before the script, the
script's own words after it, passed unchanged; what is missing or misplaced is refused with
the fix; the plan runs one worker per chip."""

from __future__ import annotations

import pytest

from launcher.core.errors import UsageError
from launcher.core.job_plan import JobOptions
from launcher.core.slices import TpuSlices
from launcher.core.torch_plan import TorchJobSpec, TorchPlan
from launcher.core.tpu_table import slice_shape

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
