"""Prometheus' HTTP API on the local cluster's Prometheus (`tpu-launcher up --prometheus`), for
the tests and benchmarks that read the jobs' metrics back."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable

from launcher.client.local import prometheus as local_prometheus
from launcher.core.job import metrics as jm
from launcher.core.job.metrics import JobMetric

WINDOW = "2h"  # far enough back for any job of a test session


def query(expr: str) -> list[dict]:
    """An instant query's result (vectors, or matrices for a range selector)."""
    return _get("query", {"query": expr})


def query_range(expr: str, start: float, end: float, step: float = 5) -> list[dict]:
    """A range query's series, as Grafana asks for a panel's."""
    return _get("query_range", {"query": expr, "start": start, "end": end, "step": step})


def last(metric: JobMetric, job_id: str, agg: str = "max", **labels: str) -> float | None:
    """The metric's last value in a job (Prometheus keeps it after the series ends), its series
    combined by `agg`; None when the job never recorded it."""
    selector = ", ".join(f'{k}="{v}"' for k, v in {"job_id": job_id, **labels}.items())
    found = query(f"{agg}(last_over_time({metric.prometheus_name}{{{selector}}}[{WINDOW}]))")
    return float(found[0]["value"][1]) if found else None


def settled[T](read: Callable[[], T], expected: T, wait_s: float = 30) -> T:
    """`read()` once it returns `expected`, or its last value after `wait_s`: Ray's agents
    export every 10 s and Prometheus scrapes every 5 s, so a job's last values may land a
    scrape after it ended (CI once read 2 of 3 restarts right away)."""
    deadline = time.monotonic() + wait_s
    while (value := read()) != expected and time.monotonic() < deadline:
        time.sleep(2)
    return value


def restarts_by_cause(job_id: str) -> dict[str, float]:
    """The job's restarts counter by cause, where platform teams alert."""
    expr = (
        f"sum by (cause) (last_over_time({jm.RESTARTS.prometheus_name}"
        f'{{job_id="{job_id}"}}[{WINDOW}]))'
    )
    return {r["metric"]["cause"]: float(r["value"][1]) for r in query(expr)}


def _get(path: str, params: dict) -> list[dict]:
    url = f"{local_prometheus.address()}/api/v1/{path}?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=30) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]
