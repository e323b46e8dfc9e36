"""The launcher's TPU table against the FAKE gcloud's own copy of GKE's facts (quoted from
Google's pages in tests/support/fake_gcloud.py, never read from the table): a zone, flex-start
zone, machine type or node label that drifts on one side is named here, before a plan test
would fail on it less clearly."""

from __future__ import annotations

import pytest

from launcher.core.tpu.table import GENERATIONS, GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL
from tests.support import fake_gcloud

pytestmark = pytest.mark.unit


def test_the_tpu_table_and_googles_pages_name_the_same_zones_machines_and_labels():
    for gen in GENERATIONS.values():
        assert set(gen.zones) == fake_gcloud.TPU_ZONES[gen.name], gen.name
        assert set(gen.flex_start_zones) == fake_gcloud.FLEX_START_ZONES.get(gen.name, set())
        assert gen.gke_accelerator == fake_gcloud.ACCELERATORS[gen.name]
        assert (gen.name in fake_gcloud.PLACED_BY_WORKLOAD_POLICY) == gen.workload_policy
        for chips, machine in gen.machines.items():
            assert fake_gcloud.TPU_MACHINES[machine] == (gen.name, chips)
    machines = {m for g in GENERATIONS.values() for m in g.machines.values()}
    assert machines == set(fake_gcloud.TPU_MACHINES)
    labels = (GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL)
    assert labels == (fake_gcloud.ACCELERATOR_LABEL, fake_gcloud.TOPOLOGY_LABEL)
