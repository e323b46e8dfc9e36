"""A PyTorch job on the real local cluster, as a user submits one: `tpu-launcher submit
--framework torch` of the shipped example (a tiny Llama in plain PyTorch, FSDP2; copied into a
directory of the user's, which ships with the job) on the simulated v5p-16. Ray Train runs 8
workers (2 hosts x 4 chips), each holding its own chip (TPU_VISIBLE_CHIPS from its TPU resource)
with the rank variables Ray sets, in one process group (gloo: the simulated hosts' devices are
CPUs); the loss falls; every save is torch.distributed.checkpoint's, committed in the bucket;
a host killed mid-run (every chip's process of it) restarts the group from the latest save; a host
then taken back with a 15 s notice (`tpu-launcher local preempt`) has every worker save the step
they all reach next, and the group goes on from it; Prometheus holds its last step and its restarts
by cause.
(All simulated hosts share one IP, where Ray's LOCAL_RANK would run 0-7; each worker reads its
own host's, 0-3, as on TPU: launcher.runtime.torch.hosts.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.job_control import (
    RESTORED,
    drained_for_preemption,
    jobs_client,
    kill_every_worker_of,
    submit_no_wait,
    train_workers,
    wait_until_done,
)
from harness.local_ray import launcher_result, run_name, tpu_launcher
from harness.paths import REPO
from harness.prometheus import last, restarts_by_cause, settled
from launcher.client.jobs.torch_submit import EXAMPLE
from launcher.client.local.layout import HOST_ENV
from launcher.core.job import metrics as jm
from launcher.core.job.checkpoints import committed_steps
from launcher.core.job.events import EventKind, events
from launcher.core.job.torch_plan import SIMULATED_NOTE
from launcher.core.tpu.preemption import FAILED, PREEMPTED

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
STEPS, SAVE_EVERY = 80, 10
NOTICE_S = 15  # half a Spot VM's 30 s: the save on it takes a second here
WORKER = re.compile(
    r"\(RayTrainWorker pid=(\d+)[^)]*\)\S* (?:\[script\] )?worker (\d+) of (\d+): local rank \d+, "
    r"chip (\d+), device (\w+)"
)  # rank 0's lines are marked as the script's, for the job's view


def wait_for_progress(client, job_id: str, step: int, timeout: float = 300) -> str:
    """The job's log once its [progress] lines reach `step` (counted from 1)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = client.logs(job_id)
        if any(int(e.fields["step"]) >= step for e in events(logs, EventKind.PROGRESS)):
            return logs
        assert client.status(job_id) not in ("FAILED", "STOPPED"), logs[-3000:]
        time.sleep(1)
    raise AssertionError(f"job {job_id} did not reach step {step} in {timeout}s")


def test_a_worker_per_chip_trains_resumes_after_a_killed_host_and_saves_on_a_notice(
    local_cluster, tmp_path
):
    work = tmp_path / "my-torch-project"
    work.mkdir()
    shutil.copy(EXAMPLE, work / "train.py")
    client, name = jobs_client(), run_name("torch")
    job_id = f"{name}-job"
    submitted = submit_no_wait(
        local_cluster, job_id, f"--run_name={name}", "train.py", "--steps", str(STEPS),
        "--save-every", str(SAVE_EVERY), cwd=work, options=("--framework", "torch"),
    )  # fmt: skip
    assert "  train.py (" in submitted, submitted

    before_kill = wait_for_progress(client, job_id, 13)
    # Which simulated host each worker process of this start runs on (its node's env).
    host_of = {p.pid: p.environ().get(HOST_ENV) for p in train_workers()}
    killed = kill_every_worker_of("local-slice-0-host-1")
    assert len(killed) == 4, killed  # one process per chip
    # The restarted group trains on; then host 1 is taken back with a notice.
    before_notice = wait_for_progress(client, job_id, 30)
    asked_at = time.time()
    preempted = tpu_launcher(
        "local", "preempt", "--host", "1", "--notice", str(NOTICE_S), timeout=180
    )
    assert preempted.returncode == 0, preempted.stdout + preempted.stderr
    # Ray's record of the host, which names a restart no notice reached: its node died drained
    # for preemption, while `preempt` ran (the time tells which restart's window it was in).
    drained = [at for at in drained_for_preemption().values() if at >= asked_at]
    assert len(drained) == 1 and drained[0] <= time.time(), drained
    assert wait_until_done(client, job_id) == "SUCCEEDED"
    logs = client.logs(job_id)

    assert "v5p-16 (TPU v5p 2x2x2: 2 hosts x 4 chips): 8 PyTorch workers, one per chip" in logs
    # What differs from TPU, said once for the job's three starts, among the lines submit shows.
    said = [e.line for e in events(logs, EventKind.LAUNCHER) if e.line == SIMULATED_NOTE]
    assert len(said) == 1, said
    first_start = {int(pid): rest for pid, *rest in WORKER.findall(before_kill)}
    assert sorted(int(rank) for rank, *_ in first_start.values()) == list(range(8)), first_start
    assert {(world, device) for _, world, _, device in first_start.values()} == {("8", "cpu")}
    # Each host's four workers hold its four chips, one each (Ray's TPU_VISIBLE_CHIPS).
    chips: dict[str, list[int]] = {}
    for pid, (_, _, chip, _) in first_start.items():
        chips.setdefault(host_of[pid], []).append(int(chip))
    assert {h: sorted(c) for h, c in chips.items()} == {
        f"local-slice-0-host-{h}": [0, 1, 2, 3] for h in (0, 1)
    }, chips

    result = launcher_result(logs)
    assert result["last_step"] == STEPS - 1
    failed, notice = result["restarts"]
    # The kill: the restarted group went on from the latest committed save before it.
    assert failed["cause"] == "failed", failed
    (step,) = {int(s) for s in RESTORED.findall(logs[len(before_kill) : len(before_notice)])}
    last_before = max(int(e.fields["step"]) for e in events(before_kill, EventKind.PROGRESS))
    assert 0 <= last_before - (step + 1) <= SAVE_EVERY, (last_before, step)
    # The notice: every worker saved the step they all reached next, and the restart went on
    # from it, computing nothing again; a preemption spends no failure.
    assert notice["cause"] == "preempted" and notice["saved_step"] is not None, notice
    assert (notice["resumed_at"], notice["recomputed"]) == (notice["saved_step"] + 1, 0), notice
    assert "restarts:     1 preemption (--max_preemptions), 1 failure (--max_failures)" in logs
    # The host drained, by its name; Ray stops its whole slice (its preempted_ranks: all 8).
    assert notice["hosts"] == ["local-slice-0/1"], notice
    assert "[preempted] host local-slice-0/1 was taken back (" in logs
    assert result["first_step"] == notice["saved_step"] + 1, result
    assert result["final_loss"] < 3.0, result  # bytes: ln 256 = 5.5 untrained
    # Ray Train's per-rank report lines (one per rank and save) stay in its own log files.
    assert "Reporting training result" not in logs

    done = committed_steps(local_cluster.bucket / name)
    periodic = set(range(SAVE_EVERY - 1, STEPS, SAVE_EVERY))
    assert set(done) == periodic | {notice["saved_step"]}, done
    shards = {
        p.name for p in (local_cluster.bucket / name / "checkpoints" / str(done[-1])).iterdir()
    }
    assert ".metadata" in shards and sum(s.endswith(".distcp") for s in shards) == 8, shards
    assert result["checkpoints"] == done

    # Its figures as a MaxText job's, in Prometheus: the last step, rank 0's gauge, and the
    # restarts by cause, each counted once as the summary has it.
    assert settled(lambda: last(jm.STEP, job_id), STEPS - 1) == STEPS - 1
    counted = {FAILED: 1.0, PREEMPTED: 1.0}
    assert settled(lambda: restarts_by_cause(job_id), counted) == counted
    print(
        f"\ntorch: killed host 1's 4 workers after step {last_before}; resumed from {step}; "
        f"notice: saved {notice['saved_step']}, resumed {notice['resumed_at']}; final loss "
        f"{result['final_loss']:.3f}"
    )


DDP = REPO / "tests" / "support" / "torchrun_ddp.py"  # a team's torchrun script, unchanged
LOSS = re.compile(r"^\[script\] step (\d+) loss (\S+)$", re.M)


def test_a_torchrun_script_runs_unchanged_under_torchrun_on_one_machine():
    """The script the next test submits is a torchrun script: torchrun runs it as it is."""
    torchrun = Path(sys.executable).parent / "torchrun"
    argv = [str(torchrun), "--nproc_per_node=2", str(DDP), "--steps", "20"]
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert {f"rank {r} of 2" for r in (0, 1)} <= set(re.findall(r"rank \d of 2", ran.stdout))
    losses = [float(x) for x in re.findall(r"^step \d+ loss (\S+)$", ran.stdout, re.M)]
    assert len(losses) == 4 and losses[-1] < losses[0] / 5, losses


def test_a_torchrun_script_runs_unchanged_on_every_chip(local_cluster, tmp_path):
    """The same file, submitted as it is to the simulated v5p-16: its own init_process_group
    (gloo) takes the group Ray Train made, torchrun's variables are there on all 8 ranks, the
    loss falls; the job's view shows rank 0's output, says what a plain script gets, counts no
    steps it was not told of, and shows none of Ray Train's per-rank report lines. A host killed
    mid-run restarts it: the script resumes from its own torch.distributed.checkpoint save, the
    view says why in one line, and the summary and `status` (its text and its JSON) say the same
    restart and the same goodput, claiming nothing of where the script went on from; submitted
    again, it resumes from its last save, and nothing the launcher says claims it started over.
    A script naming a backend the slice does not give is refused by the driver before any worker
    starts, with the line to change."""
    work = tmp_path / "team-project"
    work.mkdir()
    shutil.copy(DDP, work / "ddp.py")
    client, name = jobs_client(), run_name("torchrun")
    job_id = f"{name}-job"
    own = local_cluster.bucket / name / "own-checkpoints"  # the script's own DCP saves
    submit_no_wait(
        local_cluster, job_id, f"--run_name={name}", "ddp.py", "--steps", "30",
        "--step-seconds", "0.5", "--ckpt-dir", str(own), cwd=work, options=("--framework", "torch"),
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while "[script] step 10 loss" not in client.logs(job_id):
        assert time.monotonic() < deadline, client.logs(job_id)[-3000:]
        time.sleep(1)
    # The host of rank 0, whose records speak for the worker group: the hardest one to lose.
    (node,) = re.findall(
        r"\[script\] rank 0 of 8: local rank \d of \d, node (\d)", client.logs(job_id)
    )
    assert len(kill_every_worker_of(f"local-slice-0-host-{node}")) == 4  # a process per chip
    assert wait_until_done(client, job_id, timeout=600) == "SUCCEEDED", client.logs(job_id)[-3000:]
    whole = client.logs(job_id)
    # torchrun's per-host view, as on a TPU slice's two hosts: each host's four workers read
    # LOCAL_RANK 0-3 of LOCAL_WORLD_SIZE 4 and their host's NODE_RANK.
    seen = {
        int(rank): (int(local), int(local_world), int(node))
        for rank, local, local_world, node in re.findall(
            r"rank (\d) of 8: local rank (\d) of (\d), node (\d), master \S+:\d+", whole
        )
    }
    assert sorted(seen) == list(range(8)), whole[-3000:]
    per_node: dict[int, list[int]] = {}
    for local, local_world, node in seen.values():
        assert local_world == 4, seen
        per_node.setdefault(node, []).append(local)
    assert {n: sorted(ranks) for n, ranks in per_node.items()} == {0: [0, 1, 2, 3], 1: [0, 1, 2, 3]}
    view = tpu_launcher("logs", job_id, cwd=work, timeout=120).stdout
    # The restarted group went on from the script's own latest save (the kill came after step
    # 10 was printed: step 9's save, or a later one).
    (resumed,) = re.findall(r"^\[script\] resumed from step (\d+)$", view, re.M)
    assert int(resumed) % 10 == 9, view
    losses = [float(loss) for _, loss in LOSS.findall(view)]
    assert losses[-1] < losses[0] / 5, view
    # The restart, said the same by every reader.
    assert re.search(r"^  ranks [\d,]+: \S", view, re.M), view  # why, in one line
    said = "restarts:     0 preemptions (--max_preemptions), 1 failure (--max_failures)"
    assert said in view and "start 2: a failure; the script reports no steps" in view, view
    assert "started from step 0" not in view and "from its start" not in view
    status = json.loads(tpu_launcher("status", job_id, "--json", cwd=work, timeout=120).stdout)
    assert [r["cause"] for r in status["restarts"]] == ["failed"], status
    assert status["goodput"]["by"] == "wall time"
    text = tpu_launcher("status", job_id, cwd=work, timeout=120).stdout
    (summary_goodput,) = [x for x in view.splitlines() if x.startswith("goodput:")]
    assert summary_goodput in text and said in text, text
    assert f"{status['goodput']['goodput']:.0%} of" in summary_goodput
    assert "ddp.py uses no TorchJob: it runs as torchrun runs it" in view
    assert "steps done:   not reported" in view and "0 of 0" not in view
    goodput = re.search(r"goodput: +(\d+)% of (\d+)s wall time by wall time: the script ran", view)
    assert goodput and 0 < int(goodput[1]) < 100, view  # start-up is the rest
    assert "Reporting training result" not in whole + view

    # Submitted again, longer: the script resumes from its own last save, and nothing the
    # launcher says claims it started over.
    again = f"{name}-again"
    submit_no_wait(
        local_cluster, again, f"--run_name={name}", "ddp.py", "--steps", "40",
        "--ckpt-dir", str(own), cwd=work, options=("--framework", "torch"),
    )  # fmt: skip
    assert wait_until_done(client, again, timeout=600) == "SUCCEEDED", client.logs(again)[-3000:]
    view = tpu_launcher("logs", again, cwd=work, timeout=120).stdout
    assert "[script] resumed from step 29" in view and "[script] step 30 loss" in view, view
    assert "started from step 0" not in view and "from its start" not in view, view
    assert json.loads(tpu_launcher("status", again, "--json", cwd=work).stdout)["restarts"] == []

    (work / "ddp.py").write_text(DDP.read_text().replace('backend="gloo"', 'backend="tpu_dist"'))
    refused = f"{name}-tpu"
    submit_no_wait(
        local_cluster, refused, f"--run_name={refused}", "ddp.py",
        cwd=work, options=("--framework", "torch"),
    )  # fmt: skip
    assert wait_until_done(client, refused, timeout=300) == "FAILED"
    said = client.logs(refused)
    line = DDP.read_text().splitlines().index('dist.init_process_group(backend="gloo")') + 1
    assert f"ddp.py:{line}" in said and "the slice's process group is gloo" in said, said[-2000:]
    assert f"line {line}: call init_process_group() without a backend" in said
    assert "RayTrainWorker" not in said  # refused before any worker started
