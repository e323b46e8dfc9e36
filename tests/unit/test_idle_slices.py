"""The idle check's clock and the facts a release that gives idle slices back sets on its head
(launcher.core.tpu.idle); the loop runs against the real KubeRay in
tests/cluster/test_idle_slices.py."""

from __future__ import annotations

import pytest

from launcher.core.release_facts import RELEASE_ENV, IdleRelease, ReleaseFacts
from launcher.core.tpu.idle import QuietClock
from launcher.core.tpu.slices import TpuSlices, worker_group_slices
from launcher.core.tpu.table import tpu_type

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


def test_a_release_that_gives_slices_back_offers_every_one_of_them():
    slices = TpuSlices(tpu_type("v6e-16"), 2)
    idle = ReleaseFacts(slices, idle_release=IdleRelease("tpu-ray", "tpu-group", 1800.0))
    read = ReleaseFacts.from_env({RELEASE_ENV: idle.to_json()})
    assert read.idle_release == IdleRelease("tpu-ray", "tpu-group", 1800.0)
    assert read.offered_slices == slices  # none may be up: a job checks itself against these
    # Without it, the slices a job sees are the hosts up now.
    assert ReleaseFacts(slices).offered_slices is None
    assert ReleaseFacts.from_env({}).idle_release is None


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
    from launcher.runtime.train import entrypoint

    idle = ReleaseFacts(idle_release=IdleRelease("tpu-ray", "tpu-group", 600))
    monkeypatch.setenv(RELEASE_ENV, idle.to_json())
    entrypoint.release.cache_clear()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    entrypoint._ask_for_slices(2)
    out = capsys.readouterr().out
    assert "could not ask for 2 slice(s) of tpu-ray/tpu-group" in out
    assert "kubectl patch raycluster tpu-ray" in out
