"""The local cluster's own bookkeeping against its live Ray: which simulated hosts are alive,
and `slice-up`'s wait for a host whose registration outlasted `ray start`'s fixed 30 s."""

from __future__ import annotations

import json

import pytest

from launcher.client.local_cluster import (
    NODES_FILE,
    _wait_until_joined,
    alive_hosts,
    running_slices,
)
from launcher.core.errors import UsageError
from launcher.core.slices import LABEL_SLICE, LABEL_WORKER_ID

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_the_gcs_names_each_live_simulated_host_by_slice_and_worker(local_cluster):
    assert running_slices() >= 1
    started = json.loads(NODES_FILE.read_text())["nodes"]  # what `up` started
    expected = {(n["labels"][LABEL_SLICE], n["labels"][LABEL_WORKER_ID]) for n in started}
    assert ("local-slice-0", "1") in expected
    assert alive_hosts() == expected


def test_waiting_for_a_host_that_never_joins_names_it_and_the_fix(local_cluster):
    _wait_until_joined("local-slice-0", "0", 5)  # alive: returns at once
    with pytest.raises(UsageError) as e:
        _wait_until_joined("local-slice-9", "0", 3)
    assert "host 0 of local-slice-9 did not join the local cluster within 3s" in str(e.value)
    assert "make up SLICES=2" in str(e.value)
