"""The Grafana dashboard of the job's metrics (launcher.core.job.metrics), by run and slice:
progress, throughput, MFU, goodput and where the time went, checkpoint health, restarts; and
beside them what the TPU chips did, per host (launcher.core.tpu.device_metrics).

`tpu-launcher dashboard` prints it; the chart ships the same JSON (files/grafana-dashboard.json,
`make chart-dashboard`, checked by `make verify`) in a ConfigMap that Grafana's dashboard sidecar
loads. Every query takes the series' last values by (run, slice): rank 0 and the driver each
report theirs, and a restart's new rank 0 reports under a new worker id.
"""

from __future__ import annotations

import json
from typing import Any

from launcher.core.job import metrics as jm
from launcher.core.tpu import device_metrics as dm

UID = "tpu-launcher-jobs"
TITLE = "TPU training jobs (tpu-launcher)"
SELECTOR = '{run=~"$run", slice=~"$slice"}'


def _of(metric: jm.JobMetric, by: str = "run, slice", agg: str = "max") -> str:
    return f"{agg} by ({by}) ({metric.prometheus_name}{SELECTOR})"


def _chips(name: str, agg: str = "avg") -> str:
    return f"{agg} by (instance) ({dm.RAY_NAMES[name]})"


# (title, unit, [(PromQL, legend)], description). Counters are summed over their series: each
# start's rank 0 counts its own.
PANELS: list[tuple[str, str, list[tuple[str, str]], str]] = [
    ("Steps done", "none", [(f"{_of(jm.STEP)} + 1", "{{run}} {{slice}}")], jm.STEP.help),
    (
        "Loss",
        "none",
        [(_of(jm.LOSS), "{{run}} train"), (_of(jm.EVAL_LOSS), "{{run}} eval")],
        f"{jm.LOSS.help} Beside it: {jm.EVAL_LOSS.help}",
    ),
    ("Step time", "s", [(_of(jm.STEP_TIME), "{{run}}")], jm.STEP_TIME.help),
    ("Tokens/s per device", "none", [(_of(jm.TOKENS), "{{run}}")], jm.TOKENS.help),
    ("TFLOP/s per device", "none", [(_of(jm.TFLOPS), "{{run}}")], jm.TFLOPS.help),
    ("MFU", "percentunit", [(_of(jm.MFU), "{{run}}")], jm.MFU.help),
    ("Goodput", "percentunit", [(_of(jm.GOODPUT), "{{run}}")], jm.GOODPUT.help),
    (
        "Where the time went",
        "s",
        [(_of(jm.GOODPUT_PART, "run, part"), "{{run}} {{part}}"), (_of(jm.WALL), "{{run}} wall")],
        f"{jm.GOODPUT_PART.help} Beside them: {jm.WALL.help}",
    ),
    (
        "Checkpoint saves",
        "none",
        [(_of(jm.CHECKPOINT_SAVES, agg="sum"), "{{run}}")],
        jm.CHECKPOINT_SAVES.help,
    ),
    (
        "Latest committed checkpoint",
        "none",
        [
            (_of(jm.CHECKPOINT_COMMITTED), "{{run}} committed"),
            (_of(jm.CHECKPOINT_STEP), "{{run}} saving"),
        ],
        f"{jm.CHECKPOINT_COMMITTED.help} Beside it: {jm.CHECKPOINT_STEP.help}",
    ),
    (
        "Save blocked training",
        "s",
        [(_of(jm.CHECKPOINT_SAVE_TIME), "{{run}}")],
        jm.CHECKPOINT_SAVE_TIME.help,
    ),
    ("Checkpoint size", "bytes", [(_of(jm.CHECKPOINT_SIZE), "{{run}}")], jm.CHECKPOINT_SIZE.help),
    (
        "Restarts",
        "none",
        # A job that never restarted has no series: 0 for each run with steps instead.
        [
            (
                f"{_of(jm.RESTARTS, 'run, cause', 'sum')} or on (run) (0 * {_of(jm.STEP, 'run')})",
                "{{run}} {{cause}}",
            )
        ],
        jm.RESTARTS.help,
    ),
    ("Steps computed", "none", [(_of(jm.STEPS, agg="sum"), "{{run}}")], jm.STEPS.help),
    # The chips themselves, per TPU host (each node's agent is its own scrape `instance`):
    # what Ray's agent scraped from the TPU device plugin (launcher.core.tpu.device_metrics). A
    # node's series carry no run: beside the step time, they are the cluster's hosts.
    (
        "TPU duty cycle by host",
        "percent",
        [(_chips(dm.DUTY_CYCLE), "{{instance}}")],
        "Per TPU host, the mean over its chips of the share of time they were executing (the "
        "TPU device plugin's duty_cycle). Every host near 0 while steps stall: a hang in host "
        "code; one host low while the others work: a straggler (the job's driver names it in "
        "`tpu-launcher status`).",
    ),
    (
        "TensorCore utilization by host",
        "percent",
        [(_chips(dm.TENSORCORE_UTILIZATION), "{{instance}}")],
        "Per TPU host, the mean over its chips of the TensorCores' utilization (the device "
        "plugin's tensorcore_utilization).",
    ),
    (
        "HBM by host",
        "bytes",
        [
            (_chips(dm.MEMORY_USED, "sum"), "{{instance}} in use"),
            (_chips(dm.MEMORY_TOTAL, "sum"), "{{instance}} in all"),
        ],
        "Per TPU host, its chips' HBM in use and in all (the device plugin's memory_used and "
        "memory_total).",
    ),
]
WIDTH, HEIGHT, PER_ROW = 8, 8, 3


def dashboard() -> dict[str, Any]:
    panels = []
    for i, (title, unit, targets, description) in enumerate(PANELS):
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "description": description,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {
                    "x": (i % PER_ROW) * WIDTH,
                    "y": (i // PER_ROW) * HEIGHT,
                    "w": WIDTH,
                    "h": HEIGHT,
                },
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                "targets": [
                    {"refId": chr(ord("A") + n), "expr": expr, "legendFormat": legend}
                    for n, (expr, legend) in enumerate(targets)
                ],
            }
        )
    step = jm.STEP.prometheus_name
    return {
        "uid": UID,
        "title": TITLE,
        "tags": ["tpu", "maxtext", "ray"],
        "timezone": "browser",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                _variable("run", f"label_values({step}, run)"),
                _variable("slice", f'label_values({step}{{run=~"$run"}}, slice)'),
            ]
        },
        "panels": panels,
    }


def _variable(name: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": name},
        "definition": query,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "refresh": 2,
    }


def queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (panel title, PromQL) of a dashboard."""
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"
