"""The launcher's TorchTPU slice variables where Ray's ranks are not laid out as TorchTPU's
own derivation assumes, where the webhook left a slice unmutated, and where the pod pins one.
(tests/image/test_torch_tpu_env.py compares them with the pinned torch-tpu's own.)"""

from __future__ import annotations

import os

import pytest

from launcher.runtime.torch.tpu_env import (
    ADDRESSES,
    TOPOLOGY,
    ChipWorker,
    mesh,
    one_host_slices,
    set_unless_set,
    slice_env,
    this_worker,
)

pytestmark = pytest.mark.unit


def test_each_rank_is_given_its_own_hosts_address_in_rays_order():
    """Ray orders ranks by node, not by TPU_WORKER_ID: rank r's address is its own host's, at
    its index there, whatever the order (TorchTPU's rank r dials address r)."""
    a, b = (ChipWorker("g-0", host, ip) for host, ip in (("h1", "10.0.0.2"), ("h0", "10.0.0.1")))
    (env, *_) = envs = slice_env([a, a, b, b], "2x4", {})
    assert env[ADDRESSES] == "h1:8070,h1:8071,h0:8070,h0:8071"
    assert {e[ADDRESSES] for e in envs} == {env[ADDRESSES]} and env[TOPOLOGY] == "2,4,1"


def test_a_slice_on_several_hosts_without_the_webhooks_hostnames_is_refused():
    workers = [ChipWorker("g-0", "localhost", ip) for ip in ("10.0.0.1", "10.0.0.2")]
    with pytest.raises(RuntimeError, match=r"slice g-0's workers run on 2 hosts .* webhook"):
        one_host_slices(workers)
    assert one_host_slices(workers[:1]) == {"g-0": [0]}


def test_a_worker_id_outside_the_hostnames_is_refused():
    env = {"TPU_WORKER_HOSTNAMES": "a,b", "TPU_WORKER_ID": "2", "TPU_NAME": "g-0"}
    with pytest.raises(RuntimeError, match="TPU_WORKER_ID is '2'"):
        this_worker("10.0.0.1", env)
    assert this_worker("10.0.0.1", env | {"TPU_WORKER_ID": "1"}).host == "b"


def test_a_value_the_pod_sets_is_kept(monkeypatch):
    monkeypatch.setenv(TOPOLOGY, "4x4x1")
    monkeypatch.delenv(ADDRESSES, raising=False)
    set_unless_set({TOPOLOGY: "4,4,1", ADDRESSES: "h:8070"})
    assert os.environ[TOPOLOGY] == "4x4x1" and os.environ[ADDRESSES] == "h:8070"
    assert mesh("2x2x2") == "2,2,2" and mesh("4x4") == "4,4,1"
