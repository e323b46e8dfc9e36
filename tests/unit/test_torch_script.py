"""A PyTorch script as torchrun runs it: what its init_process_group asks for, read before any
worker starts (launcher.core.job.torch_script); the group Ray Train made taken by the script's own
call, in a real gloo group of one process (launcher.runtime.torch.contract); rank 0's output
marked for the job's view, the launcher's own lines left as they are."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from launcher.core.errors import UsageError
from launcher.core.job.events import EventKind, format_progress, parse
from launcher.core.job.torch_script import backend_calls, check_backends, uses_torch_job
from launcher.runtime.torch.contract import ScriptRefused, _Marked, torchrun_contract

pytestmark = pytest.mark.unit
DDP = Path(__file__).parents[1] / "support" / "torchrun_ddp.py"


def test_the_backend_a_script_names_is_read_from_its_source(tmp_path):
    source = (
        "import torch.distributed as dist\n"
        "from torch.distributed import init_process_group\n"
        'dist.init_process_group(backend="gloo")\n'
        'init_process_group("cpu:gloo,cuda:nccl", world_size=2)\n'
        "dist.init_process_group(backend=chosen)\n"  # computed: checked when it runs
        "dist.init_process_group()\n"
    )
    calls = backend_calls(source)
    assert [(c.line, c.backend) for c in calls] == [(3, "gloo"), (4, "cpu:gloo,cuda:nccl")]
    assert calls[1].named() == {"gloo", "nccl"} and calls[1].takes("gloo")
    script = tmp_path / "train.py"
    script.write_text(source)
    check_backends(script)  # every named backend is one some slice gives
    check_backends(DDP, ("gloo",))  # the plain DDP script, on the local slice
    with pytest.raises(UsageError) as refused:
        check_backends(DDP, ("tpu_dist",))  # ... on TPU: the line to change
    line = DDP.read_text().splitlines().index('dist.init_process_group(backend="gloo")') + 1
    assert refused.value.field == f"{DDP}:{line}"
    assert f"line {line}: call init_process_group() without a backend" in refused.value.fix
    script.write_text('import torch.distributed as d\nd.init_process_group("nccl")\n')
    with pytest.raises(UsageError, match=r"backend='nccl'.*tpu_dist or gloo"):
        check_backends(script)
    assert not uses_torch_job(DDP.read_text())
    assert uses_torch_job("from launcher.runtime.torch.job import TorchJob\n")


def test_the_scripts_init_process_group_takes_the_group_made_before_it(tmp_path):
    import torch
    import torch.distributed as dist

    init = f"file://{tmp_path / 'store'}"
    dist.init_process_group("gloo", init_method=init, rank=0, world_size=1)  # Ray Train's
    try:
        with torchrun_contract("train.py"):
            assert dist.init_process_group(backend="gloo") is None  # taken, not made again
            from torch.distributed import init_process_group

            init_process_group()  # no backend: the slice's
            with pytest.raises(ScriptRefused, match="with backend='gloo'"):
                dist.init_process_group(backend="nccl")
            dist.destroy_process_group()  # Ray Train's to end
            assert dist.is_initialized()
            t = torch.ones(2)
            dist.all_reduce(t)  # the group still works
        assert dist.init_process_group is not None and dist.is_initialized()
        with pytest.raises(ValueError, match="twice"):  # outside, torch's own rule again
            dist.init_process_group(backend="gloo")
    finally:
        dist.destroy_process_group()


def test_rank_0s_own_lines_are_marked_and_the_launchers_are_not():
    out = io.StringIO()
    stream = _Marked(out)
    stream.write("step 0 loss 10.5\nstep 5 ")
    stream.write("loss 4.3\n")
    stream.write(format_progress(1, 10, 2.0, 0.1, 100.0, None, None, 9.0) + "\n")
    stream.write("launcher: the chips are simulated\n\n")
    stream.write("partial")
    stream.flush()
    lines = out.getvalue().split("\n")
    assert [parse(x).kind if parse(x) else None for x in lines] == [
        EventKind.SCRIPT,
        EventKind.SCRIPT,
        EventKind.PROGRESS,
        EventKind.LAUNCHER,
        None,
        EventKind.SCRIPT,
    ]
    assert lines[1] == "[script] step 5 loss 4.3"
