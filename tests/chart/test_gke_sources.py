"""Every rule the GKE road relies on names its source: each gcloud command and flag that `gke
plan|up|down` runs, for every values file and every way of obtaining the TPUs, and each field of
the Kueue objects `gke queue` prints, is in tests/support/gke_sources.py with its page and the
words there. A rule added without one is listed here."""

from __future__ import annotations

import pytest

from harness.helm import CHART, VALUES_FILES, helm
from launcher import cli
from launcher.client.gke import commands as gke_commands
from launcher.client.gke.plan import down_plan
from launcher.client.gke.queue import queue_objects
from launcher.core.errors import UsageError
from tests.support.gke_sources import COMMANDS, FLAGS, KUEUE_FIELDS, unsourced

pytestmark = pytest.mark.chart

CAPACITIES = (
    ["--capacity=on-demand"],
    ["--capacity=spot", "--migrate-node-metadata"],
    ["--capacity=flex-start"],
    ["--capacity=flex-start", "--set", "kueue.queueName=q"],  # queued provisioning
    ["--capacity=reservation", "--reservation=r1"],
    ["--set", "ray.worker.tpu.releaseIdleAfterSeconds=1800"],  # pools from zero
)


def _release(values: str, flags: list[str]):
    args = ["gke", "plan", "--values", str(values), "--chart", str(CHART)]
    args += ["--helm", str(helm(3)), "--project=p", "--cluster=c", "--bucket=my-ckpts"]
    args += ["--location=us-central1-a", "--allow-zone=us-central1-a", *flags]
    ns = cli._parser().parse_args(args)
    target, need = gke_commands._read_release(ns)
    return ns, target, need


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda p: p.name)
def test_every_gcloud_command_and_flag_of_a_plan_names_its_source(values):
    missing: set[str] = set()
    for flags in CAPACITIES:
        try:
            ns, target, need = _release(values, flags)
        except UsageError as e:  # the one combination the chart refuses: flex-start on v4
            assert values.name == "v4-16.yaml" and "no flex-start for TPU v4" in str(e), e
            continue
        up = gke_commands._up_plan(ns, target, need)
        down = down_plan(need, target, ns.release, ns.namespace, ns.helm)
        for argv in up.commands("gcloud") + down.commands("gcloud"):
            missing.update(unsourced(argv))
    assert not missing, f"rules without a source in tests/support/gke_sources.py: {sorted(missing)}"


@pytest.mark.parametrize("values", ["v6e-16.yaml", "v6e-16-x2.yaml", "v5e-32-saxml.yaml"])
@pytest.mark.parametrize("capacity", ["spot", "flex-start"])
def test_every_field_of_the_queue_names_its_source(values, capacity):
    path = next(p for p in VALUES_FILES if p.name == values)
    _, _, need = _release(path, [f"--capacity={capacity}"])
    fields = {
        f"{o['kind']}.{key}"
        for o in queue_objects(need.pools, "q", "default")
        for key in o.get("spec", {})
    }
    assert fields <= set(KUEUE_FIELDS), sorted(fields - set(KUEUE_FIELDS))


def test_the_check_lists_what_has_no_source():
    """The rule cannot pass on an empty table: an unknown command and flag are listed, and every
    source has a page and words."""
    argv = ["gcloud", "container", "clusters", "resize", "c", "--size=3", "--project=p"]
    assert unsourced(argv) == ["gcloud container clusters resize", "--size"]
    for source in [*COMMANDS.values(), *FLAGS.values(), *KUEUE_FIELDS.values()]:
        assert source.page and len(source.quote) > 8, source
