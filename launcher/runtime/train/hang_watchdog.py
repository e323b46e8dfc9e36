"""Every host's hang watchdog: a thread beside MaxText's train loop that writes the host's
heartbeat and, when the host has finished no step, eval or save for longer than the bound
(launcher.core.job.hangs), writes every host's stacks to the job's log and the run's hangs/
directory and ends this host's process, which ends the attempt: Ray Train restarts the worker
group, MaxText resumes from the last checkpoint, and the hang policy charges it to --max_hangs.

A host stuck in a collective still runs this thread (XLA waits with the GIL released): it reads
its own stacks. A frozen host runs nothing, so the lowest live host reads its stacks from
outside, with py-spy, in a Ray task on the frozen host's node."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from launcher.core.job import hangs
from launcher.core.job.events import format_hang
from launcher.core.job.hangs import HangBound, Heartbeat
from launcher.runtime.job import kv as job_kv
from launcher.runtime.periodic import every

if TYPE_CHECKING:
    from launcher.runtime.train.progress import ProgressTracker

# The watchdog looks this often; a hang is seen at most this late.
CHECK_EVERY_S = 1.0
PY_SPY_TIMEOUT_S = 60.0


def write_line(line: str) -> None:
    """Into the job's log from any host (Ray relays each worker's stderr); straight to the file
    descriptor, as the progress lines go."""
    os.write(sys.stderr.fileno(), (line + "\n").encode())


def own_stacks() -> str:
    """This process's Python stacks, every thread, innermost frame last."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        out.append(f"Thread {ident} ({names.get(ident, 'not started by threading')}):")
        out += [line.rstrip("\n") for line in traceback.format_stack(frame)]
    return "\n".join(out)


def py_spy() -> str | None:
    """Ray[default]'s py-spy: beside this Python (a virtual environment's bin/), or on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def dump_stacks_of(pid: int) -> str:
    """Another process's stacks, read without stopping it (a frozen process stays as it is)."""
    binary = py_spy()
    if binary is None:
        return "py-spy is not installed beside Ray here (ray[default] brings it)"
    proc = subprocess.run(
        [binary, "dump", "--nonblocking", "--pid", str(pid)],
        capture_output=True,
        text=True,
        timeout=PY_SPY_TIMEOUT_S,
    )
    if proc.returncode != 0:
        return (
            f"py-spy could not read process {pid}: {proc.stderr.strip().splitlines()[0:1]}; "
            "where the container forbids reading another process (ptrace), give the worker "
            "container the SYS_PTRACE capability"
        )
    return proc.stdout.rstrip()


def frozen_host_stacks(heartbeat: Heartbeat) -> str:
    """A frozen host's stacks, read by a Ray task on its node (it uses no CPU of the node's)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0, max_retries=0)(dump_stacks_of).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(heartbeat.node_id, soft=False)
    )
    try:
        return ray.get(task.remote(heartbeat.pid), timeout=PY_SPY_TIMEOUT_S + 30)
    except Exception as e:  # the node may be gone too: say so, and go on
        return f"could not read its stacks on node {heartbeat.node_ip}: {type(e).__name__}: {e}"


class HangWatchdog:
    """One per host. `tracker` is MaxText's progress on this host; `say` writes a line to the
    job's log; `end` ends this host's process (tests pass their own)."""

    def __init__(
        self,
        bound: HangBound,
        tracker: ProgressTracker,
        summary_key: str,
        rank: int,
        node_id: str,
        node_ip: str,
        run_dir: Path | None,
        say: Callable[[str], None] | None = None,
        end: Callable[[int], None] = os._exit,
        clock: Callable[[], float] = time.time,
    ):
        self.bound, self.tracker, self.rank = bound, tracker, rank
        self.node_id, self.node_ip, self.run_dir = node_id, node_ip, run_dir
        self.say, self.end, self.clock = say or write_line, end, clock
        self.keys = job_kv.JobKeys(summary_key)
        self.fired = False
        self._beat_at = 0.0

    def start(self) -> threading.Event:
        """Runs the watchdog on its own thread; setting the returned event stops it."""
        return every(CHECK_EVERY_S, self.check, "hang-watchdog")

    def heartbeat(self, now: float) -> Heartbeat:
        steps = self.tracker.steps
        return Heartbeat(
            rank=self.rank,
            pid=os.getpid(),
            node_id=self.node_id,
            node_ip=self.node_ip,
            step=steps[-1].step if steps else None,
            progress_at=self.tracker.progress_at,
            beat_at=now,
        )

    def check(self) -> None:
        now = self.clock()
        if now - self._beat_at >= hangs.HEARTBEAT_S:
            try:
                key = self.keys.heartbeat(self.rank)
                job_kv.put(key, self.heartbeat(now).to_json())
                self._beat_at = now
            except Exception:  # the head's KV store unreachable a moment: the next beat will do
                pass
        step_seconds = [s.seconds for s in self.tracker.steps]
        gap = hangs.overdue(self.bound, step_seconds, self.tracker.progress_at, now)
        if gap is not None and not self.fired:
            self.fired = True
            try:
                self.fire(now, gap, step_seconds)
            finally:  # whatever the report could not do, the hung attempt ends
                self.end(hangs.HANG_EXIT_CODE)

    def fire(self, now: float, gap: float, step_seconds: list[float]) -> None:
        me = self.heartbeat(now)
        recorded = job_kv.records(self.keys.heartbeat()).values()
        others = [h for v in recorded if (h := Heartbeat.from_json(v)).rank != self.rank]
        beats = sorted([me, *others], key=lambda h: h.rank)
        frozen = [h for h in beats if h.frozen(now)]
        job_kv.put(
            self.keys.hang(time.time_ns(), self.rank),
            {
                "rank": self.rank,
                "at": now,
                "step": me.step,
                "gap": gap,
                "bound": self.bound.seconds(step_seconds),
                "frozen": [h.rank for h in frozen],
            },
        )
        self._write(me, own_stacks(), "read by the host itself")
        if hangs.reporter(beats, now) == self.rank:
            self.say(
                format_hang(
                    f"no step, eval or save for {gap:.0f}s on host {self.rank} (bound "
                    f"{self.bound.describe(step_seconds)}); every host's stacks follow in the "
                    f"log" + (f" and are in {self.run_dir / 'hangs'}" if self.run_dir else "")
                )
            )
            for h in beats:
                self.say(format_hang(h.describe(now)))
            for h in frozen:
                self._write(h, frozen_host_stacks(h), f"read by py-spy from host {self.rank}")
            self.say(
                format_hang(
                    "this attempt ends; the job restarts from its last checkpoint "
                    "(a hang restart: --max_hangs)"
                )
            )
            job_kv.put(self.keys.hang_reported, {"at": self.clock()})
        else:
            self._wait_for_report(now - self.bound.seconds(step_seconds) / 2)

    def _wait_for_report(self, since: float) -> None:
        """Until the reporter has read the frozen hosts (the first host to end ends them all)."""
        deadline = time.monotonic() + hangs.REPORT_WAIT_S
        while time.monotonic() < deadline:
            done = job_kv.get(self.keys.hang_reported)
            if done and done["at"] >= since:
                return
            time.sleep(1)

    def _write(self, host: Heartbeat, stacks: str, how: str) -> None:
        """One host's stacks into the job's log and the run's hangs/ directory."""
        name = hangs.stacks_file(host.step, host.rank, host.pid)
        where = ""
        if self.run_dir is not None:
            path = self.run_dir / "hangs" / name
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(stacks + "\n")
                where = f": {path}"
            except OSError as e:
                where = f" (could not write {path}: {e})"
        self.say(f"launcher: stacks of host {host.rank} (pid {host.pid}, {how}){where}")
        self.say(stacks)
