"""The idle check's clock and the facts a release that gives idle slices back sets on its head
(launcher.core.idle_slices); the loop runs against the real KubeRay in
tests/cluster/test_idle_slices.py."""

from __future__ import annotations

import json

import pytest

from launcher.core.idle_slices import IDLE_RELEASE_ENV, IdleRelease, QuietClock
from launcher.core.slices import OFFERED_SLICES_ENV, offered_slices, worker_group_slices

pytestmark = pytest.mark.unit


def test_slices_go_only_after_a_whole_quiet_period():
    quiet = QuietClock(after_s=600)
    assert not quiet.observe(False, 0)
    assert not quiet.observe(False, 599)
    assert quiet.observe(False, 600)


@pytest.mark.parametrize("seen", [True, None], ids=["a job", "jobs unreadable"])
def test_a_job_or_not_knowing_starts_the_quiet_period_again(seen):
    quiet = QuietClock(after_s=600)
    quiet.observe(False, 0)
    assert not quiet.observe(seen, 500)
    assert not quiet.observe(False, 700)  # quiet again since 700, not since 0
    assert quiet.observe(False, 1300)


def test_the_head_reads_what_the_chart_writes():
    release = IdleRelease("tpu-ray", "tpu-group", 1800.0)
    assert IdleRelease.from_env({IDLE_RELEASE_ENV: release.to_env()}) == release
    assert IdleRelease.from_env({}) is None
    spec = {"generation": "v6e", "topology": "4x4", "chips_per_host": 4, "slices": 2}
    offered = offered_slices({OFFERED_SLICES_ENV: json.dumps(spec)})
    assert offered is not None and (offered.shape.name, offered.num_slices) == ("v6e-16", 2)
    assert offered_slices({}) is None


def test_a_worker_group_with_no_replicas_offers_its_maximum():
    pod = {
        "nodeSelector": {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "4x4",
        },
        "containers": [{"resources": {"limits": {"google.com/tpu": 4}}}],
    }
    group = {"template": {"spec": pod}, "minReplicas": 0, "maxReplicas": 2}
    ((slices, _),) = worker_group_slices({"workerGroupSpecs": [group]})
    assert slices.num_slices == 2
    ((slices, _),) = worker_group_slices({"workerGroupSpecs": [{**group, "replicas": 1}]})
    assert slices.num_slices == 1


def test_a_driver_that_cannot_reach_the_api_says_how_to_ask_by_hand(monkeypatch, capsys):
    from launcher.runtime import entrypoint

    monkeypatch.setenv(IDLE_RELEASE_ENV, IdleRelease("tpu-ray", "tpu-group", 600).to_env())
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    entrypoint._ask_for_slices(2)
    out = capsys.readouterr().out
    assert "could not ask for 2 slice(s) of tpu-ray/tpu-group" in out
    assert "kubectl patch raycluster tpu-ray" in out
