"""The job's metrics where platform teams look: a real Prometheus (the pinned one, scraping the
local cluster's metrics agents through Ray's service-discovery file) holds every figure of the
session's trained run, and they agree with the job's own summary; every query of the chart's
Grafana dashboard returns data from it. No job start of its own: it reads the session's run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from harness.local_ray import launcher_result
from harness.paths import REPO
from harness.prometheus import WINDOW, last, query, query_range, settled
from launcher.client.local import prometheus as local_prometheus
from launcher.core.child_process import ends_with_this_process
from launcher.core.job import metrics as jm
from launcher.core.job.dashboard import dashboard, queries
from launcher.runtime.job.metrics import tree_bytes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def job(trained_run) -> tuple[str, dict]:
    """The session's trained run's Ray job id and its summary, once Prometheus holds the job's
    last figures, the driver's final report (its wall time, exactly the summary's, and the
    committed checkpoint) and rank 0's (its last step): where this module makes the run, the
    job's end is seconds old, and its last values reach Prometheus an agent's export (10 s) and
    a scrape (5 s) later, each host's agent in its own time (a CI run on a fresh machine read
    the driver's and not yet the worker's; on one core, a report 10 s before the end was
    within 5% of a 250 s wall, and the committed step was still the one before)."""
    assert trained_run.code == 0, trained_run.output[-6000:]
    (job_id,) = re.findall(r"^submitted job (\S+) to ", trained_run.output, re.MULTILINE)
    summary = launcher_result(trained_run.output)
    wall = summary["goodput"]["wall_seconds"]

    def arrived() -> bool:
        seen = last(jm.WALL, job_id)
        return (
            seen is not None
            and seen == pytest.approx(wall, rel=1e-6)
            and last(jm.CHECKPOINT_COMMITTED, job_id) == max(summary["checkpoints"])
            and last(jm.STEP, job_id) == summary["last_step"]
        )

    settled(arrived, True, wait_s=120)
    return job_id, summary


def test_prometheus_holds_every_figure_as_the_summary_has_it(trained_run, job):
    job_id, summary = job
    (series,) = query(f'last_over_time({jm.STEP.prometheus_name}{{job_id="{job_id}"}}[{WINDOW}])')
    assert {k: series["metric"][k] for k in jm.JOB_LABELS} == {
        "run": trained_run.name,
        "slice": "v5p-16",
        "job_id": job_id,
    }
    assert last(jm.STEP, job_id) == summary["last_step"] == 9
    assert last(jm.STEPS, job_id, "sum") == summary["steps_this_run"] == 10
    assert last(jm.LOSS, job_id) == pytest.approx(summary["final_loss"], abs=1e-3)
    assert last(jm.EVAL_LOSS, job_id) == pytest.approx(summary["evals"][-1][1], abs=1e-3)
    assert last(jm.STEP_TIME, job_id) > 0 and last(jm.TOKENS, job_id) > 0
    assert last(jm.TFLOPS, job_id) is not None  # MaxText's figure, tiny on CPU devices
    assert last(jm.MFU, job_id) is None  # CPU devices: no peak to be a fraction of

    goodput = summary["goodput"]
    wall = goodput["wall_seconds"]
    assert last(jm.WALL, job_id) == pytest.approx(wall, rel=0.05)
    assert last(jm.GOODPUT, job_id) == pytest.approx(goodput["goodput"], rel=0.05)
    for part, seconds in goodput["parts"].items():
        assert last(jm.GOODPUT_PART, job_id, part=part) == pytest.approx(seconds, abs=0.05 * wall)

    assert last(jm.CHECKPOINT_SAVES, job_id, "sum") == len(summary["checkpoints"]) == 3
    assert last(jm.CHECKPOINT_STEP, job_id) == last(jm.CHECKPOINT_COMMITTED, job_id) == 9
    assert last(jm.CHECKPOINT_SAVE_TIME, job_id) >= 0
    assert last(jm.CHECKPOINT_SIZE, job_id) == tree_bytes(trained_run.dir / "checkpoints" / "9")
    assert summary["restarts"] == [] and last(jm.RESTARTS, job_id, "sum") is None

    # Live while the job ran, not only at its end: the driver's wall time every 10 s.
    (walls,) = query(f'{jm.WALL.prometheus_name}{{job_id="{job_id}"}}[{WINDOW}]')
    seen = sorted(float(v) for _, v in walls["values"])
    assert len(set(seen)) >= 3 and seen[-1] - seen[0] >= 10, seen


def test_every_dashboard_query_returns_the_runs_data(trained_run, job):
    job_id, _ = job
    (walls,) = query(f'{jm.WALL.prometheus_name}{{job_id="{job_id}"}}[{WINDOW}]')
    start, end = walls["values"][0][0] - 60, walls["values"][-1][0] + 60
    mfu = {expr for title, expr in queries(dashboard()) if title == "MFU"}
    empty = []
    for title, expr in queries(dashboard()):
        # Grafana's variables as a user picks this run, every slice.
        found = query_range(
            expr.replace("$run", trained_run.name).replace("$slice", ".*"), start, end
        )
        if expr in mfu:
            assert found == [], f"{title}: MFU on CPU devices"  # only TPU devices have a peak
        elif not found:
            empty.append(title)
    assert empty == [], f"panels without data: {empty}"
    # The restarts panel shows a 0 for a run that never restarted, not an empty graph.
    (restarts,) = query_range(
        next(e for t, e in queries(dashboard()) if t == "Restarts")
        .replace("$run", trained_run.name)
        .replace("$slice", ".*"),
        start,
        end,
    )
    assert {float(v) for _, v in restarts["values"]} == {0.0}


# A process of the local cluster that records a job gauge through JobMetrics, kept fresh (as
# rank 0 and the driver keep theirs), and a plain Ray gauge once, then lives on past the agent's
# 20 s.
KEEPER = """
import sys, time
import ray
from ray.util.metrics import Gauge
from launcher.core.job import metrics as jm
from launcher.runtime.job.metrics import JobMetrics
ray.init(address="auto")
kept = JobMetrics({"run": "keeper", "slice": "v5p-16", "job_id": "keeper"})
kept.set(jm.CHECKPOINT_SIZE, 1234)
kept.keep_fresh(every_s=2)
Gauge("tpu_launcher_test_set_once").set(1234)
print("recorded", flush=True)
time.sleep(float(sys.argv[1]))
"""
ONCE = "ray_tpu_launcher_test_set_once"


def _served() -> set[str]:
    """Which of the two gauges some node's metrics agent serves now."""
    with open(local_prometheus.ray_targets()) as f:
        targets = json.load(f)[0]["targets"]
    text = ""
    for target in targets:
        try:
            with urllib.request.urlopen(f"http://{target}/metrics", timeout=5) as response:
                text += response.read().decode()
        except OSError:  # a node going away
            continue
    kept = re.search(rf'^{jm.CHECKPOINT_SIZE.prometheus_name}{{[^}}]*run="keeper"', text, re.M)
    once = re.search(rf"^{ONCE}[{{ ]", text, re.M)
    return {name for name, seen in (("kept", kept), ("once", once)) if seen}


def test_a_gauge_kept_fresh_outlives_the_agents_20_s_and_one_set_once_does_not(local_cluster):
    proc = subprocess.Popen(
        ends_with_this_process([sys.executable, "-c", KEEPER, "60"]),
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "recorded"
        started = time.monotonic()
        while _served() != {"kept", "once"}:  # both exported within an interval (10 s)
            assert time.monotonic() < started + 20, _served()
            time.sleep(1)
        time.sleep(max(0.0, 30 - (time.monotonic() - started)))
        assert _served() == {"kept"}
    finally:
        proc.kill()
        proc.wait()
