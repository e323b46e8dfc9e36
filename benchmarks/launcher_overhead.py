#!/usr/bin/env python3
"""Launcher overhead: the same tiny MaxText job (a) as bare MaxText processes and (b) through
`tpu-launcher submit` on the local Ray cluster (JaxTrainer on the simulated v5p-16 slice), in turn,
--runs times.

Prints, per run, the median steady-state step time, the time from the command to the first
completed step and the peak RSS per simulated host, then the median ratios against the targets
(step time <= 1.02x, first step <= 1.25x, memory within 300 MB). The last run is profiled:
when each stage of `tpu-launcher submit` began, the CPU seconds every process group spent
before the first step, and each group's share of the cores while training is steady (every
process on the machine, read once a second).

    .venv/bin/python benchmarks/launcher_overhead.py [--runs 3] [--steps 30] [--hosts 2]

With --metrics it compares the job with its Ray metrics off (`--nometrics`) and on, the two
run side by side, each on one slice of a two-slice local cluster (`tpu-launcher up --tpu v5p-8
--num-slices 2`), --runs times, and prints the median steady step time of each and their ratio
against the target (metrics on within 1% of off). --control runs both with metrics off: the
spread two such jobs show without any difference between them.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from harness.local_ray import require_local_cluster
from harness.paths import REPO
from launcher.client.local.cluster import running_slices
from launcher.core.job.events import EventKind, parse
from launcher.core.job.run_dir import compile_cache_for
from launcher.runtime.train.progress import parse_step_line

WARMUP_STEPS = 5  # compile, first checkpoint
# Where the time to the first step goes under `tpu-launcher submit`: the first line of each stage.
MARKERS = {
    "submitted job": "ray job submit returned (precheck + CLI)",
    "launcher: ": "driver planned the slice (job driver started, ray.init)",
    "RayTrainWorker": "first worker output (controller + worker actors up)",
    "Initialized JAX distributed": "jax.distributed joined",
}


# Ray's actor processes by their title ("ray::Name"); the rest by executable or script.
RAY_ACTORS = {
    "RayTrainWorker": "training workers",
    "TrainController": "Ray Train controller",
    "IDLE": "idle Ray workers",
    "DashboardAgent": "Ray dashboard agents",
    "RuntimeEnvAgent": "Ray runtime-env agents",
    "JobSupervisor": "Ray job supervisor",
}
SCRIPTS = (
    ("maxtext.trainers", "training workers"),
    ("-m launcher.runtime train", "job driver (entrypoint)"),
    ("-m launcher submit", "submit client (follows the log)"),
    ("log_monitor.py", "Ray log monitor (streams worker lines)"),
    ("dashboard", "Ray dashboard"),
    ("autoscaler", "Ray autoscaler monitor"),
    ("ray.util.client", "Ray client server"),
    ("launcher_overhead.py", "this benchmark (samples memory)"),
)


def process_group(cmdline: list[str]) -> str:
    first = cmdline[0] if cmdline else ""
    if first.startswith("ray::"):
        name = first[5:].split(".")[0].split()[0] if first[5:] else ""
        return RAY_ACTORS.get(name, f"Ray actor {name}")
    if os.path.basename(first) in ("raylet", "gcs_server"):
        return f"Ray {os.path.basename(first)}"
    joined = " ".join(cmdline)
    return next((g for key, g in SCRIPTS if key in joined), "everything else")


def cpu_snapshot() -> dict[int, tuple[str, float]]:
    """pid -> (group, user+system CPU seconds) for every process this user can read."""
    snap = {}
    for proc in psutil.process_iter(["cmdline", "cpu_times"]):
        times = proc.info["cpu_times"]
        if times is None:
            continue
        snap[proc.pid] = (process_group(proc.info["cmdline"] or []), times.user + times.system)
    return snap


class CpuProfile(threading.Thread):
    """Snapshots every process's CPU time once a second; `cores()` is each group's share of
    the machine while training is steady: from the first step seen until the last snapshot
    in which every training worker still ran."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.done = threading.Event()
        self.snaps: list[tuple[float, dict]] = []

    def run(self) -> None:
        self.snaps.append((time.monotonic(), cpu_snapshot()))
        while not self.done.wait(1.0):
            self.snaps.append((time.monotonic(), cpu_snapshot()))

    def before(self, moment: float) -> dict[str, float]:
        """CPU seconds each group spent from the first snapshot to the last before `moment`."""
        taken = [(t, s) for t, s in self.snaps if t <= moment]
        if len(taken) < 2:
            return {}
        return _spent(taken[0][1], taken[-1][1])

    def cores(self, steady_from: float) -> dict[str, float]:
        def workers(snap: dict) -> int:
            return sum(1 for group, _ in snap.values() if group == "training workers")

        steady = [(t, s) for t, s in self.snaps if t >= steady_from]
        if not steady:
            return {}
        peak = max(workers(s) for _, s in steady)
        steady = [(t, s) for t, s in steady if workers(s) == peak]
        (t0, before), (t1, after) = steady[0], steady[-1]
        return {g: v / (t1 - t0) for g, v in _spent(before, after).items()} if t1 > t0 else {}


def _spent(before: dict, after: dict) -> dict[str, float]:
    spent: dict[str, float] = {}
    for pid, (group, seconds) in after.items():
        spent[group] = spent.get(group, 0.0) + seconds - before.get(pid, (group, 0.0))[1]
    return spent


@dataclass
class Run:
    label: str
    profile: CpuProfile = field(default_factory=CpuProfile)
    started: float = 0.0
    first_step_at: float | None = None
    step_seconds: dict[int, float] = field(default_factory=dict)
    step_at: dict[int, float] = field(default_factory=dict)  # when its line was seen
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
        self.step_at.setdefault(rec.step, time.monotonic())

    def cores(self) -> dict[str, float]:
        return self.profile.cores(steady_from=(self.first_step_at or 0) + 2.0)

    @property
    def steady_step(self) -> float:
        return statistics.median(v for k, v in self.step_seconds.items() if k >= WARMUP_STEPS)

    def steady_between(self, start: float, end: float) -> list[float]:
        """The steady steps whose lines were seen between `start` and `end`."""
        return [
            v
            for k, v in self.step_seconds.items()
            if k >= WARMUP_STEPS and start <= self.step_at[k] <= end
        ]

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
    run.profile.start()
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
                    # The launcher's compilation cache in the output directory, as submit's.
                    f"jax_cache_dir={compile_cache_for(str(out_dir))}",
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
    run.profile.done.set()
    if any(codes):
        sys.stderr.write("".join(run.output[-60:]))
        raise SystemExit(f"bare MaxText failed: exit codes {codes}")
    return run


_found: dict[str, object] = {"at": 0.0, "workers": []}


def _ray_workers():
    """The RayTrainWorker processes, each with the RSS of its node's Ray daemons (the process
    table is read every 2 s: reading it costs CPU the job would otherwise have)."""
    if time.monotonic() - _found["at"] < 2.0:
        return _found["workers"]
    _found["at"] = time.monotonic()
    _found["workers"] = _find_ray_workers()
    return _found["workers"]


def _find_ray_workers():
    cmdlines = [(p, " ".join(p.info["cmdline"] or [])) for p in psutil.process_iter(["cmdline"])]
    raylets = [p for p, c in cmdlines if "/raylet " in c or c.endswith("/raylet")]
    agents = [p for p, c in cmdlines if "dashboard/agent.py" in c or "runtime_env/agent" in c]
    per_node = sum(p.memory_info().rss for p in raylets + agents) // max(1, len(raylets))
    return [(p, per_node) for p, c in cmdlines if "RayTrainWorker" in c]


class LogFollower(threading.Thread):
    """Feeds each line appended to `path` to `run` as it is written (tail -f)."""

    def __init__(self, path: Path, record: Run) -> None:
        super().__init__(daemon=True)
        self.path, self.record, self.done = path, record, threading.Event()

    def run(self) -> None:
        while not self.path.exists() and not self.done.is_set():
            time.sleep(0.05)
        with self.path.open() as f:
            partial = ""
            while True:
                chunk = f.readline()
                if chunk:
                    partial += chunk
                    if partial.endswith("\n"):
                        self.record.see(partial)
                        partial = ""
                elif self.done.is_set():
                    return
                else:
                    time.sleep(0.05)

    def stop(self) -> None:
        self.done.set()
        self.join()


def via_submit(
    args, out_dir: Path, flags: tuple[str, ...] = (), label: str = "", profile: bool = True
) -> Run:
    run = Run(label or "tpu-launcher submit")
    argv = [
        sys.executable,
        "-m",
        "launcher",
        "submit",
        "--",
        *flags,
        "tiny-llama.yml",
        f"run_name=submit-{uuid.uuid4().hex[:6]}",
        f"base_output_directory={out_dir}",
        f"steps={args.steps}",
    ]
    if profile:
        run.profile.start()
    run.started = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    sampler = Sampler(run, _ray_workers)
    sampler.start()
    # The terminal shows a progress line per tenth of the run; every worker line is in the
    # job's log file, whose path submit prints first: read the step lines there, as they come.
    follower = None
    for line in proc.stdout:
        run.see(line)
        event = parse(line.rstrip())
        if follower is None and event is not None and event.kind is EventKind.FULL_LOG:
            follower = LogFollower(Path(event.fields["path"]), run)
            follower.start()
    code = proc.wait()
    if follower is not None:
        follower.stop()
    sampler.done.set()
    run.profile.done.set()
    if code:
        sys.stderr.write("".join(run.output[-60:]))
        raise SystemExit(f"tpu-launcher submit failed: exit {code}")
    return run


def _table(
    bare: dict[str, float],
    submit: dict[str, float],
    fmt: str,
    least: float,
    heads: tuple[str, str] = ("bare", "submit"),
) -> None:
    print(f"  {'':40}{heads[0]:>8}{heads[1]:>8}")
    for group in sorted(set(bare) | set(submit), key=lambda g: -submit.get(g, 0)):
        if max(bare.get(group, 0), submit.get(group, 0)) >= least:
            print(f"  {group:40}{fmt.format(bare.get(group, 0))}{fmt.format(submit.get(group, 0))}")
    print(f"  {'total':40}{fmt.format(sum(bare.values()))}{fmt.format(sum(submit.values()))}")


def _pair(args) -> tuple[Run, Run]:
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for name in ("bare", "submit"):
            (Path(tmp) / name).mkdir()
        return bare(args, Path(tmp) / "bare"), via_submit(args, Path(tmp) / "submit")


def _verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "MISSED"


METRICS_TARGET = 1.01  # steady step time with the job's Ray metrics on, over off
SEED_STEP_S = 1.1  # the GKE tutorial's Llama 3 8B step on a v6e-16 ("seconds: 1.100")
RECORDING = """
import time
import ray
from launcher.runtime.job.metrics import JobMetrics, StepMetrics
ray.init(address="auto")
steps = StepMetrics(JobMetrics({"run": "bench", "slice": "v5p-16", "job_id": "bench"}), 459, True)
n = 5000
start = time.process_time()
for i in range(n):
    steps.step(i, 0.35, 1900.0, 0.01, 4.0)
    if i % 5 == 4:
        steps.checkpoint(i)
steps.metrics.refresh()
print((time.process_time() - start) / n)
"""


def _recording_cost() -> float:
    """CPU seconds rank 0 spends recording one step's metrics (a save every 5 steps)."""
    out = subprocess.run(
        [sys.executable, "-c", RECORDING], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return float(out.split()[-1])


SIDE_BY_SIDE = ("v5p-8", 2)  # the local cluster for --metrics: two single-host slices


def metrics_overhead(args) -> None:
    """The same job with its metrics off and on, both at once, each on a slice of its own, --runs
    rounds (which is submitted first alternates). One after the other, the same job's steady
    step differed by up to 35% between runs on this machine (docs/metrics.md), far more than
    the 1% asked; side by side, both see the same machine at the same moment."""
    tpu, slices = SIDE_BY_SIDE
    if running_slices() != slices:
        raise SystemExit(
            f"--metrics runs two jobs side by side, one per slice: start the local cluster with "
            f"`tpu-launcher down && tpu-launcher up --tpu {tpu} --num-slices {slices}`"
        )
    print(
        f"\nmetrics overhead, tiny-llama.yml, {args.steps} steps, two jobs at once through "
        f"tpu-launcher submit, each on one {tpu} slice (step time: median over steps >= "
        f"{WARMUP_STEPS})",
        flush=True,
    )
    second = "off again" if args.control else "metrics on"
    print(
        f"{'run':5}{'metrics off':>14}{second:>14}{'ratio':>10}{'steps side by side':>20}",
        flush=True,
    )
    ratios, on_steps = [], []
    for i in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
            # --control: both off, the spread the machine alone gives two jobs side by side.
            flags = {"off": ("--nometrics",), "on": ("--nometrics",) if args.control else ()}
            order = ("off", "on") if i % 2 else ("on", "off")
            with ThreadPoolExecutor(2) as pool:
                started = {}
                for k in order:
                    job = (f"--tpu={tpu}", "--num_slices=1", *flags[k])
                    started[k] = pool.submit(
                        via_submit, args, Path(tmp), job, f"metrics {k}", profile=False
                    )
                    time.sleep(2)  # in order: the first takes the first slice
                runs = {k: f.result() for k, f in started.items()}
            off, on = runs["off"], runs["on"]
        # Only the steps both jobs ran at once, both steady: either's start-up (imports,
        # compile) slows the other's steps.
        start = max(r.step_at[WARMUP_STEPS] for r in (off, on))
        end = min(max(r.step_at.values()) for r in (off, on))
        both = {k: r.steady_between(start, end) for k, r in runs.items()}
        if min(map(len, both.values())) < 20:
            raise SystemExit(f"under 20 steps ran side by side: raise --steps (now {args.steps})")
        off_s, on_s = statistics.median(both["off"]), statistics.median(both["on"])
        ratios.append(on_s / off_s)
        on_steps.append(on_s)
        print(
            f"{i:<5}{off_s * 1000:>12.1f}ms{on_s * 1000:>12.1f}ms{ratios[-1]:>10.3f}"
            f"{len(both['off']):>14} / {len(both['on'])}",
            flush=True,
        )
    ratio = statistics.median(ratios)
    print(
        f"\nmedian of {args.runs} runs: step time ratio {ratio:.3f} (target <= "
        f"{METRICS_TARGET})  {_verdict(ratio, METRICS_TARGET)}; ratios {min(ratios):.3f} to "
        f"{max(ratios):.3f}"
    )
    # What the metrics add to a step, measured directly: rank 0's records through Ray's metrics
    # API in a process of this cluster, per step, against the step time measured above.
    per_step = _recording_cost()
    step = statistics.median(on_steps)
    print(
        f"recording a step's metrics: {per_step * 1e6:.0f} us of CPU per step = "
        f"{per_step / step:.4%} of this job's {step * 1000:.0f} ms step, "
        f"{per_step / SEED_STEP_S:.4%} of the GKE tutorial's {SEED_STEP_S} s TPU step "
        f"(target < 1%)  {_verdict(per_step / step, METRICS_TARGET - 1)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3, help="pairs, bare then submit, in turn")
    parser.add_argument(
        "--metrics", action="store_true", help="compare the job's metrics off and on instead"
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="with --metrics: both jobs with metrics off (what the machine alone spreads)",
    )
    args = parser.parse_args()
    require_local_cluster()
    if args.metrics:
        metrics_overhead(args)
        return
    mb = 1024 * 1024
    print(
        f"\nlauncher overhead, tiny-llama.yml, {args.steps} steps, {args.hosts} hosts x "
        f"{args.devices} CPU devices (step time: median over steps >= {WARMUP_STEPS})",
        flush=True,
    )
    print(
        f"{'run':5}{'':16}{'step time':>12}{'first step':>12}{'peak RSS/host':>16}"
        f"{'step ratio':>12}{'first ratio':>13}",
        flush=True,
    )
    ratios = []
    for i in range(1, args.runs + 1):
        a, b = _pair(args)
        step_ratio = b.steady_step / a.steady_step
        first_ratio = b.to_first_step / a.to_first_step
        ratios.append((step_ratio, first_ratio, (b.peak_per_host - a.peak_per_host) / mb))
        for r, tail in ((a, ""), (b, f"{step_ratio:>12.3f}{first_ratio:>13.3f}")):
            print(
                f"{i:<5}{r.label:16}{r.steady_step * 1000:>10.1f}ms{r.to_first_step:>11.1f}s"
                f"{r.peak_per_host / mb:>13.0f} MB{tail}",
                flush=True,
            )
    step_ratio = statistics.median(x[0] for x in ratios)
    first_ratio = statistics.median(x[1] for x in ratios)
    mem_delta = statistics.median(x[2] for x in ratios)
    print(f"\nmedian of {args.runs} runs")
    print(f"step time ratio   {step_ratio:.3f}  (target <= 1.02)  {_verdict(step_ratio, 1.02)}")
    print(f"first step ratio  {first_ratio:.3f}  (target <= 1.25)  {_verdict(first_ratio, 1.25)}")
    print(
        f"memory delta      {mem_delta:+.0f} MB (target within 300 MB)  "
        f"{_verdict(abs(mem_delta), 300)}"
    )
    print("\nthe last run, profiled. where `tpu-launcher submit`'s time to the first step goes:")
    for marker, what in MARKERS.items():
        if marker in b.marks:
            print(f"  {b.marks[marker] - b.started:6.1f}s {what}")
    print(f"  {b.to_first_step:6.1f}s first step completed (bare MaxText: {a.to_first_step:.1f}s)")
    print(
        f"\nCPU seconds spent from the command to the first step, per process group (the "
        f"start-up is CPU-bound on {os.cpu_count()} cores):"
    )
    _table(*(r.profile.before(r.first_step_at or 0) for r in (a, b)), "{:8.1f}", 0.1)
    print(
        f"\nwhere the CPU goes while training is steady, in cores of {os.cpu_count()} "
        "(user + system seconds per second):"
    )
    _table(a.cores(), b.cores(), "{:8.3f}", 0.001)
    print(
        f"Ray's per-node daemons add about {(b.peak_rss_with_ray - b.peak_per_host) / mb:.0f} "
        "MB per host on top of the worker (raylet, dashboard and runtime-env agents)"
    )


if __name__ == "__main__":
    main()
