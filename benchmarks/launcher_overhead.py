#!/usr/bin/env python3
"""Launcher overhead: the same tiny MaxText job (a) as bare MaxText processes and (b) through
`make submit` on the local Ray cluster (JaxTrainer on the simulated v5p-16 slice), in one run.

Prints, for each, the median steady-state step time, the time from the command to the first
completed step, and the peak RSS per simulated host, then the ratios against the targets
(step time <= 1.02x, first step <= 1.25x, memory within 300 MB).

    .venv/bin/python benchmarks/launcher_overhead.py [--steps 30] [--hosts 2] [--devices 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from launcher.runtime.progress import parse_step_line  # noqa: E402

WARMUP_STEPS = 5  # compile, first checkpoint
# Where the time to the first step goes under `make submit`: the first line of each stage.
MARKERS = {
    "submitted job": "ray job submit returned (precheck + CLI)",
    "launcher: ": "driver planned the slice (job driver started, ray.init)",
    "RayTrainWorker": "first worker output (controller + worker actors up)",
    "Initialized JAX distributed": "jax.distributed joined",
}


@dataclass
class Run:
    label: str
    started: float = 0.0
    first_step_at: float | None = None
    step_seconds: dict[int, float] = field(default_factory=dict)
    peak_rss: dict[int, int] = field(default_factory=dict)  # pid -> bytes
    peak_rss_with_ray: int = 0  # worker + its node's Ray daemons, per host (max)
    marks: dict[str, float] = field(default_factory=dict)  # first time a marker line was seen
    output: list[str] = field(default_factory=list)

    def see(self, line: str) -> None:
        self.output.append(line)
        for marker in MARKERS:
            if marker in line:
                self.marks.setdefault(marker, time.monotonic())
        rec = parse_step_line(line)
        if rec is None:
            return
        if self.first_step_at is None:
            self.first_step_at = time.monotonic()
        self.step_seconds.setdefault(rec.step, rec.seconds)

    @property
    def steady_step(self) -> float:
        return statistics.median(v for k, v in self.step_seconds.items() if k >= WARMUP_STEPS)

    @property
    def to_first_step(self) -> float:
        assert self.first_step_at is not None, f"{self.label}: no step completed"
        return self.first_step_at - self.started

    @property
    def peak_per_host(self) -> int:
        return max(self.peak_rss.values())


def _tree_rss(proc: psutil.Process) -> int:
    try:
        procs = [proc, *proc.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs)
    except psutil.Error:
        return 0


class Sampler(threading.Thread):
    """Samples the RSS (with children) of the processes `find()` returns until `done` is set."""

    def __init__(self, record: Run, find) -> None:
        super().__init__(daemon=True)
        self.record, self.find, self.done = record, find, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for proc, daemons in self.find():
                rss = _tree_rss(proc)
                peaks = self.record.peak_rss
                peaks[proc.pid] = max(peaks.get(proc.pid, 0), rss)
                self.record.peak_rss_with_ray = max(self.record.peak_rss_with_ray, rss + daemons)
            time.sleep(0.1)


def bare(args, out_dir: Path) -> Run:
    """H MaxText processes joined by MaxText's own CPU jax.distributed set-up."""
    run = Run("bare MaxText")
    config = REPO / "launcher" / "configs" / "tiny-llama.yml"
    procs = []
    run_name = f"bare-{uuid.uuid4().hex[:6]}"  # one run: every process must agree on it
    run.started = time.monotonic()
    for i in range(args.hosts):
        env = {
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": f"--xla_force_host_platform_device_count={args.devices}",
            # MaxText's CPU multi-process contract (what XPK sets; the port is fixed: 1234).
            "JAX_COORDINATOR_ADDRESS": "127.0.0.1",
            "JOB_INDEX": "0",
            "JOB_COMPLETION_INDEX": str(i),
            "PROCESSES_IN_JOB": str(args.hosts),
            "JAX_PROCESS_COUNT": str(args.hosts),
        }
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "maxtext.trainers.pre_train.train",
                    str(config),
                    f"run_name={run_name}",
                    f"base_output_directory={out_dir}",
                    f"steps={args.steps}",
                    "hardware=cpu",
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    sampler = Sampler(run, lambda: [(psutil.Process(p.pid), 0) for p in procs if p.poll() is None])
    sampler.start()
    readers = [
        threading.Thread(
            target=lambda p=p, first=(i == 0): [
                run.see(line) if first else None for line in p.stdout
            ],
            daemon=True,
        )
        for i, p in enumerate(procs)
    ]
    for t in readers:
        t.start()
    codes = [p.wait() for p in procs]
    for t in readers:
        t.join()
    sampler.done.set()
    if any(codes):
        sys.stderr.write("".join(run.output[-60:]))
        raise SystemExit(f"bare MaxText failed: exit codes {codes}")
    return run


def _ray_workers():
    """The RayTrainWorker processes, each with the RSS of its node's Ray daemons."""
    cmdlines = [(p, " ".join(p.info["cmdline"] or [])) for p in psutil.process_iter(["cmdline"])]
    raylets = [p for p, c in cmdlines if "/raylet " in c or c.endswith("/raylet")]
    agents = [p for p, c in cmdlines if "dashboard/agent.py" in c or "runtime_env/agent" in c]
    per_node = sum(p.memory_info().rss for p in raylets + agents) // max(1, len(raylets))
    return [(p, per_node) for p, c in cmdlines if "RayTrainWorker" in c]


def via_submit(args, out_dir: Path) -> Run:
    run = Run("make submit")
    argv = [
        sys.executable,
        "-m",
        "launcher",
        "submit",
        "--",
        "tiny-llama.yml",
        f"run_name=submit-{uuid.uuid4().hex[:6]}",
        f"base_output_directory={out_dir}",
        f"steps={args.steps}",
    ]
    run.started = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    sampler = Sampler(run, _ray_workers)
    sampler.start()
    for line in proc.stdout:  # rank 0's lines carry pid=...; count each step once
        run.see(line)
    code = proc.wait()
    sampler.done.set()
    if code:
        sys.stderr.write("".join(run.output[-60:]))
        raise SystemExit(f"make submit failed: exit {code}")
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--devices", type=int, default=4)
    args = parser.parse_args()
    status = subprocess.run([sys.executable, "-m", "launcher", "local-status"], cwd=REPO)
    if status.returncode:
        raise SystemExit("start the local cluster first: make up")
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for name in ("bare", "submit"):
            (Path(tmp) / name).mkdir()
        a = bare(args, Path(tmp) / "bare")
        b = via_submit(args, Path(tmp) / "submit")
    mb = 1024 * 1024
    print(
        f"\nlauncher overhead, tiny-llama.yml, {args.steps} steps, {args.hosts} hosts x "
        f"{args.devices} CPU devices (median over steps >= {WARMUP_STEPS})"
    )
    print(f"{'':16}{'step time':>12}{'first step':>12}{'peak RSS/host':>16}")
    for r in (a, b):
        print(
            f"{r.label:16}{r.steady_step * 1000:>10.1f}ms{r.to_first_step:>11.1f}s"
            f"{r.peak_per_host / mb:>13.0f} MB"
        )
    step_ratio = b.steady_step / a.steady_step
    first_ratio = b.to_first_step / a.to_first_step
    mem_delta = (b.peak_per_host - a.peak_per_host) / mb
    print(
        f"\nstep time ratio   {step_ratio:.3f}  (target <= 1.02)  "
        f"{'ok' if step_ratio <= 1.02 else 'MISSED'}"
    )
    print(
        f"first step ratio  {first_ratio:.3f}  (target <= 1.25)  "
        f"{'ok' if first_ratio <= 1.25 else 'MISSED'}"
    )
    print(
        f"memory delta      {mem_delta:+.0f} MB (target within 300 MB)  "
        f"{'ok' if abs(mem_delta) <= 300 else 'MISSED'}"
    )
    print("\nwhere `make submit`'s time to the first step goes (seconds from the command):")
    for marker, what in MARKERS.items():
        if marker in b.marks:
            print(f"  {b.marks[marker] - b.started:6.1f}  {what}")
    print(f"  {b.to_first_step:6.1f}  first step completed (bare MaxText: {a.to_first_step:.1f})")
    print(
        f"Ray's per-node daemons add about {(b.peak_rss_with_ray - b.peak_per_host) / mb:.0f} "
        "MB per host on top of the worker (raylet, dashboard and runtime-env agents)"
    )


if __name__ == "__main__":
    main()
