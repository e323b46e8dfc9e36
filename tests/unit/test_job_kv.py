"""A job's records in Ray's KV store are named by launcher.runtime.job.kv.JobKeys alone: the
layout the driver, the hosts and Ray Train's policy read is written once."""

from __future__ import annotations

import re

import pytest

from harness.paths import REPO
from launcher.runtime.job.kv import JobKeys

pytestmark = pytest.mark.unit


def test_the_layout_under_a_jobs_summary_key():
    keys = JobKeys("summary/run/1")
    assert keys.attempt(7) == "summary/run/1/attempts/7"
    assert keys.attempt() == "summary/run/1/attempts/"  # every start's, as a prefix
    assert keys.last_step(7) == "summary/run/1/last_step/7"
    assert keys.notice(5, 2) == "summary/run/1/notices/5-2"
    assert keys.heartbeat(1) == "summary/run/1/heartbeats/1"
    assert keys.hang(5, 0) == "summary/run/1/hangs/5-0"
    assert keys.hang_reported == "summary/run/1/hang-reported"
    # A prefix never matches another kind's keys, nor another job's.
    assert not keys.hang(5, 0).startswith(keys.heartbeat())
    assert not JobKeys("summary/run/10").attempt(1).startswith(keys.attempt())


def test_no_module_composes_a_kv_key_itself():
    composed = re.compile(r"job_kv\.(put|get|keys|records)\(f[\"']|_put\(f[\"']")
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "launcher" / "runtime").glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if composed.search(line)
    ]
    assert not found, found
