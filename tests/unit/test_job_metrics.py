"""The job's metrics: Prometheus' naming conventions, the dashboard built from them, and what
rank 0 and the driver record (into a recorder standing in for Ray's metrics API; the e2e test
reads the real ones back from a real Prometheus)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from launcher.core.job import metrics as jm
from launcher.core.job.dashboard import SELECTOR, dashboard, queries
from launcher.core.job.goodput import Goodput
from launcher.core.job.outcome import Outcome, Trained
from launcher.core.tpu.preemption import FAILED, PREEMPTED
from launcher.runtime.job.metrics import JobReporter, StepMetrics, submission_id

pytestmark = pytest.mark.unit

UNITS = ("_seconds", "_bytes", "_ratio", "_total", "_step", "_loss", "_device")


@pytest.mark.parametrize("metric", jm.METRICS, ids=lambda m: m.name)
def test_names_follow_prometheus_conventions(metric):
    assert re.fullmatch(r"tpu_launcher_[a-z_]+", metric.name)
    assert metric.name.endswith("_total") == (metric.kind == "counter")
    assert metric.name.endswith(UNITS) or metric.name in ("tpu_launcher_step", "tpu_launcher_loss")
    # tpu_launcher_eval_loss ends in _loss: a loss has no unit (nats).
    assert "_seconds" not in metric.name[:-8] and "ms" not in metric.name.split("_")
    assert set(metric.tag_keys) >= set(jm.JOB_LABELS)


def test_the_dashboard_shows_every_metric_and_no_other():
    exprs = [expr for _, expr in queries(dashboard())]
    shown = {name for expr in exprs for name in re.findall(r"ray_tpu_launcher_\w+", expr)}
    assert shown == {m.prometheus_name for m in jm.METRICS}
    for expr in exprs:  # every series it reads is the run and slice its variables choose
        selectors = re.findall(r"ray_tpu_launcher_\w+(\{[^}]*\})?", expr)
        assert selectors == [SELECTOR] * len(selectors), expr


def test_the_dashboard_is_valid_grafana_json_with_unique_panels():
    board = json.loads(json.dumps(dashboard()))
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    spots = {(p["gridPos"]["x"], p["gridPos"]["y"]) for p in board["panels"]}
    assert len(spots) == len(ids)  # no panel on top of another
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "run", "slice"]


class Recorder:
    """Stands in for launcher.runtime.job.metrics.JobMetrics: what was set and added, by metric."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, tuple], float] = {}

    def set(self, metric, value, **labels):
        self.values[(metric.name, tuple(sorted(labels.items())))] = value

    def inc(self, metric, value=1.0, **labels):
        if value > 0:
            key = (metric.name, tuple(sorted(labels.items())))
            self.values[key] = self.values.get(key, 0) + value

    def get(self, metric, **labels):
        return self.values.get((metric.name, tuple(sorted(labels.items()))))


def test_rank_0_records_each_step_and_a_saves_blocking_time():
    rec = Recorder()
    steps = StepMetrics(rec, peak_tflops=100.0, hardware_flops=True)
    steps.step(0, 9.0, 10, 40, 5.0)  # the first step carries the start-up: never steady
    for n in range(1, 5):
        steps.step(n, 1.0, 10, 40, 4.0)
    steps.checkpoint(4)
    steps.step(5, 3.5, 10, 40, 3.9)  # the step after the save carries its blocking part
    assert rec.get(jm.CHECKPOINT_SAVE_TIME) == pytest.approx(2.5)
    assert rec.get(jm.STEP) == 5 and rec.get(jm.STEPS) == 6 and rec.get(jm.LOSS) == 3.9
    assert rec.get(jm.MFU) == pytest.approx(0.4)
    assert (rec.get(jm.CHECKPOINT_SAVES), rec.get(jm.CHECKPOINT_STEP)) == (1, 4)


def test_maxtexts_eval_line_becomes_the_eval_event_the_metric_and_the_attempts_record():
    """MaxText 0.2.5's metric_logger line, as every host logs it once per eval."""
    import logging

    from launcher.core.job.goodput import Attempt
    from launcher.runtime.train.progress import ProgressTracker

    rec, said = Recorder(), []
    tracker = ProgressTracker(total_steps=20, echo=False, attempt=Attempt(started_at=0.0))
    tracker.metrics = StepMetrics(rec, peak_tflops=None, hardware_flops=False)
    tracker.say = said.append
    line = (
        "Completed eval after train step 5, loss=3.646, perplexity=38.330, "
        "total_weights=844.0, avg_z_loss=0.000"
    )
    for _ in range(2):  # the same eval reaching the logger twice counts once
        tracker.emit(logging.LogRecord("absl", logging.INFO, "", 0, line, None, None))
    step = "completed step: 6, seconds: 0.050, TFLOP/s/device: 0.001, Tokens/s/device: "
    step += "2000.000, total_weights: 450, loss: 3.600"
    tracker.emit(logging.LogRecord("absl", logging.INFO, "", 0, step, None, None))
    assert tracker.attempt.evals == [(5, 3.646)]
    assert rec.get(jm.EVAL_LOSS) == 3.646
    assert said[0] == "[eval] after step 5: eval loss 3.6460 perplexity 38.33"
    assert " eval loss 3.6460 " in said[1]  # the progress line carries the last eval


def test_no_mfu_where_the_devices_are_cpus():
    rec = Recorder()
    StepMetrics(rec, peak_tflops=459.0, hardware_flops=False).step(0, 1.0, 10, 0.001, 5.0)
    assert rec.get(jm.MFU) is None and rec.get(jm.TFLOPS) == 0.001


def _outcome(goodput: float, *causes: str) -> Outcome:
    parts = dict.fromkeys(
        ("startup", "compile", "productive", "checkpoint", "restarts", "other"), 1.0
    )
    return Outcome(
        goodput=Goodput(6.0, parts, goodput, 0.0),
        compile_cache={},
        saves={},
        starts=[],
        restarts=[SimpleNamespace(cause=c) for c in causes],
        trained=Trained(0, 0),
        evals=[],
    )


def test_the_driver_counts_each_restart_once_by_its_cause(tmp_path):
    rec = Recorder()
    reporter = JobReporter(rec, lambda: {}, tmp_path)
    reporter.report(_outcome(0.1))
    reporter.report(_outcome(0.2, PREEMPTED))
    reporter.report(_outcome(0.3, PREEMPTED, FAILED, PREEMPTED))
    reporter.report(_outcome(0.3, PREEMPTED, FAILED, PREEMPTED))
    assert rec.get(jm.RESTARTS, cause=PREEMPTED) == 2 and rec.get(jm.RESTARTS, cause=FAILED) == 1
    assert rec.get(jm.GOODPUT) == 0.3 and rec.get(jm.GOODPUT_PART, part="compile") == 1.0


def _commit(run_dir, step: int, size: int) -> None:
    (run_dir / "checkpoints" / str(step) / "items").mkdir(parents=True)
    (run_dir / "checkpoints" / str(step) / "items" / "d").write_bytes(b"x" * size)
    (run_dir / "checkpoints" / str(step) / "commit_success.txt").write_text("")


def test_the_driver_reports_the_latest_committed_checkpoint_and_its_size(tmp_path):
    for step, size in ((5, 100), (10, 250)):
        _commit(tmp_path, step, size)
    (tmp_path / "checkpoints" / "15.orbax-checkpoint-tmp-1").mkdir()  # a save under way
    rec = Recorder()
    reporter = JobReporter(rec, lambda: {}, tmp_path)
    reporter.report(_outcome(0.5))
    assert rec.get(jm.CHECKPOINT_COMMITTED) == 10 and rec.get(jm.CHECKPOINT_SIZE) == 250
    _commit(tmp_path, 15, 400)  # the save committed: the next report has it
    reporter.report(_outcome(0.5))
    assert rec.get(jm.CHECKPOINT_COMMITTED) == 15 and rec.get(jm.CHECKPOINT_SIZE) == 400


def test_the_job_id_is_the_submission_id_ray_hands_the_driver(monkeypatch):
    config = {"runtime_env": {}, "metadata": {"job_submission_id": "r-20261125-0407"}}
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps(config))
    assert submission_id() == "r-20261125-0407"
