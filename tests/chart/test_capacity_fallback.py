"""A capacity fallback, `capacity: [reservation:NAME, on-demand, spot]`, as the chart renders it
and `gke plan`, `gke compute-class` and `gke queue` make it: a GKE ComputeClass whose priorities
are the items in order (the pods select the class), or Kueue's flavors in that order (the pods
select no capacity: Kueue adds the admitting flavor's labels). GKE cannot run here: the
ComputeClass is checked against the fields GKE's reference documents, written below as facts;
the pools' flags go through gcloud's own parser (test_gke_authorities); Kueue's walk along the
flavors runs in the real Kueue (tests/cluster/test_kueue_queue.py)."""

from __future__ import annotations

import os
from typing import Any

import pytest
import yaml

from harness.helm import CHART, by_kind, helm, refused, render
from harness.paths import REPO
from launcher import cli
from tests.support import fake_gcloud as fake_gcloud_module

pytestmark = pytest.mark.chart

V6E_16 = REPO / "values" / "v6e-16.yaml"
FALLBACK = ("--set", "ray.worker.tpu.capacity={reservation:res-a,on-demand,spot}")
QUEUED = ("--set", "kueue.queueName=team-a")
TARGET = ("--project=my-proj", "--cluster=ml", "--location=us-east5-b", "--bucket=my-ckpts")
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"

# GKE's ComputeClass reference (cloud.google.com/kubernetes-engine/docs/reference/crds/
# computeclass, apiVersion cloud.google.com/v1): the spec's fields and a priority rule's, as
# documented there (None: a leaf; a dict: its own fields; a list of one dict: its items').
RULE: dict[str, Any] = {
    "machineFamily": None,
    "machineType": None,
    "minCores": None,
    "minMemoryGb": None,
    "maxRunDurationSeconds": None,
    "spot": None,
    "nodepools": None,
    "placement": {"policyName": None},
    "reservations": {
        "affinity": None,  # Specific, AnyBestEffort, None
        "specific": [{"name": None, "project": None, "reservationBlock": {"name": None}}],
    },
    "gpu": {"type": None, "count": None, "driverVersion": None},
    "tpu": {"type": None, "count": None, "topology": None},
    "storage": None,
    "location": None,
    "nodeSystemConfig": None,
}
COMPUTE_CLASS: dict[str, Any] = {
    "apiVersion": None,
    "kind": None,
    "metadata": {"name": None},
    "spec": {
        "activeMigration": {"optimizeRulePriority": None},
        "autoscalingPolicy": None,
        "description": None,
        "nodePoolAutoCreation": {"enabled": None},
        "nodePoolConfig": None,
        "priorityDefaults": None,
        "priorities": [RULE],
        "whenUnsatisfiable": None,  # ScaleUpAnyway, DoNotScaleUp
    },
}
WHEN_UNSATISFIABLE = ("ScaleUpAnyway", "DoNotScaleUp")


def undocumented(value: Any, fields: Any, path: str = "") -> list[str]:
    """The keys of `value` GKE's reference does not document at their place."""
    if fields is None:
        return []
    if isinstance(fields, list):
        return [p for i, v in enumerate(value) for p in undocumented(v, fields[0], f"{path}[{i}]")]
    wrong = [f"{path}.{k}" for k in value if k not in fields]
    return wrong + [
        p
        for k, v in value.items()
        if k in fields
        for p in undocumented(v, fields[k], f"{path}.{k}")
    ]


def worker_pod(docs: list[dict]) -> dict:
    clusters = [c["spec"] for c in by_kind(docs, "RayCluster")]
    (cluster,) = clusters or [j["spec"]["rayClusterSpec"] for j in by_kind(docs, "RayJob")]
    return cluster["workerGroupSpecs"][0]["template"]["spec"]


def test_a_computeclass_fallback_selects_the_class_and_each_host_may_read_its_node():
    docs = render(V6E_16, *FALLBACK)
    pod = worker_pod(docs)
    assert pod["nodeSelector"] == {
        COMPUTE_CLASS_LABEL: "ml-tpu-ray",
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
    }
    tolerated = {(t["key"], t["value"]) for t in pod["tolerations"]}
    assert {(COMPUTE_CLASS_LABEL, "ml-tpu-ray"), ("cloud.google.com/gke-spot", "true")} <= tolerated
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["TPU_CAPACITY"]["value"] == "reservation:res-a,on-demand,spot"
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert pod["automountServiceAccountToken"] is True
    (role,) = by_kind(docs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    (binding,) = by_kind(docs, "ClusterRoleBinding")
    assert [s["name"] for s in binding["subjects"]] == [pod["serviceAccountName"]]
    # One capacity: no class, no token, no ClusterRole; the host is told its capacity.
    single = render(V6E_16)
    pod = worker_pod(single)
    assert COMPUTE_CLASS_LABEL not in pod["nodeSelector"]
    assert pod["automountServiceAccountToken"] is False
    assert not by_kind(single, "ClusterRole")
    (container,) = pod["containers"]
    assert {"name": "TPU_CAPACITY", "value": "on-demand"} in container["env"]


def test_a_kueue_fallback_leaves_the_capacity_to_the_admitting_flavor():
    job = ("--set", "ray.job.enabled=true", "--set", "ray.job.args={base.yml}")
    pod = worker_pod(render(V6E_16, *FALLBACK, *QUEUED, *job))
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
    }
    # Kueue adds the flavor's toleration: one of the chart's would let an on-demand job onto Spot.
    assert "gke-spot" not in str(pod.get("tolerations", []))


@pytest.mark.parametrize(
    ("sets", "said"),
    [
        (
            ("--set", "ray.worker.tpu.capacity={on-demand,spot}"),
            None,  # accepted: a ComputeClass walks it
        ),
        (
            ("--set", "ray.worker.tpu.capacity={on-demand,spot}", "--set",
             "ray.worker.tpu.capacityFallback=kueue"),
            "capacityFallback: kueue walks the list with a Kueue queue's flavors",
        ),
        (
            ("--set", "ray.worker.tpu.capacity={on-demand,flex-start}"),
            "flex-start in a ComputeClass fallback is not offered here",
        ),
        (
            ("--set", "ray.worker.tpu.capacity={spot,on-demand,spot}"),
            "are equal",  # the schema's uniqueItems, before the chart's own check
        ),
        (
            ("--set", "ray.worker.tpu.capacity={spot,on-demand}", "--set",
             "ray.worker.tpu.reservation=res-a"),
            "is set but capacity is spot, on-demand",
        ),
        (
            ("--set", "ray.worker.tpu.capacity={reservation:Bad_Name,spot}"),
            "ray/worker/tpu/capacity",  # the schema: not a reservation's name
        ),
    ],
)  # fmt: skip
def test_a_fallback_the_chart_cannot_make_is_refused_with_its_fix(sets, said):
    if said is None:
        assert render(V6E_16, *sets)
        return
    assert said in refused(*sets, "--set", "global.gcsfuse.bucketName=bkt1", values=V6E_16)


@pytest.fixture(autouse=True)
def gcloud_taking_every_field(tmp_path, monkeypatch):
    """A FAKE gcloud on PATH whose loader takes every field of a node system configuration, as
    a gcloud newer than 528.0.0 does: that one refuses the Spot pools' shutdown fields, so its
    `gke plan` refuses as gke up would (tests/chart/test_gke_plan.py)."""
    fake_gcloud_module.install(tmp_path / "bin", tmp_path / "gke-state.json")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")


def _printed(capsys, action: str, *flags: str) -> str:
    args = ["gke", action, "--values", str(V6E_16), "--chart", str(CHART), "--helm", str(helm(3))]
    assert cli.main([*args, *TARGET, "--namespace", "ml", *flags]) == 0
    return capsys.readouterr().out


def test_gke_makes_a_pool_per_item_and_the_compute_class_tries_them_in_order(capsys):
    capacity = ("--capacity", "reservation:res-a,on-demand,spot")
    plan = _printed(capsys, "plan", *capacity).replace(" \\\n    ", " ")
    creates = [
        ln
        for ln in plan.splitlines()
        if ln.strip().startswith("gcloud container node-pools create tpu-ray")
    ]
    names = [ln.split()[4] for ln in creates]
    assert names == ["tpu-ray-v6e-16-res-0", "tpu-ray-v6e-16-od-0", "tpu-ray-v6e-16-spot-0"]
    for line in creates:  # each joins the class, each starts empty
        assert "--node-labels=cloud.google.com/compute-class=ml-tpu-ray" in line
        assert "--node-taints=cloud.google.com/compute-class=ml-tpu-ray:NoSchedule" in line
        assert "--num-nodes=0 --total-min-nodes=0" in line and "--total-max-nodes=4" in line
    assert "--reservation=res-a" in creates[0] and "--spot" in creates[2]
    assert "--spot" not in creates[1] and "--reservation=" not in creates[1]
    assert "--reservation-affinity=none" in creates[1]  # on demand: no reservation taken
    assert "apply it before `helm install` (`tpu-launcher gke compute-class`" in plan

    (cls,) = yaml.safe_load_all(_printed(capsys, "compute-class", *capacity))
    assert undocumented(cls, COMPUTE_CLASS) == []
    spec = cls["spec"]
    assert (cls["apiVersion"], cls["kind"], cls["metadata"]["name"]) == (
        "cloud.google.com/v1",
        "ComputeClass",
        "ml-tpu-ray",
    )
    # Each rule names its item's own pools, the ones the plan makes: a rule by attributes (on
    # demand: `tpu` alone) would also match the reservation's pool of the same class.
    assert spec["priorities"] == [{"nodepools": [name]} for name in names]
    assert spec["whenUnsatisfiable"] in WHEN_UNSATISFIABLE
    assert spec["nodePoolAutoCreation"] == {"enabled": False}  # the pools gke plan makes


def test_a_compute_class_fallback_checks_gkes_version_before_the_cluster_is_made(capsys):
    """Custom ComputeClasses need GKE 1.30.3-gke.1451000 (GKE's "About custom ComputeClasses"):
    on v5p, whose generation sets no floor, the class's is the one checked before `clusters
    create` and on an existing cluster."""
    args = ["gke", "plan", "--values", str(REPO / "values" / "v5p-16.yaml"), "--chart", str(CHART)]
    args += ["--helm", str(helm(3)), *TARGET, "--namespace", "ml", "--allow-zone=us-east5-b"]
    args += ["--capacity", "reservation:res-a,on-demand"]
    assert cli.main(args) == 0
    plan = capsys.readouterr().out
    gate = "GKE 1.30.3-gke.1451000 or later (ComputeClass ml-tpu-ray's rules need it)"
    assert f"regular channel gets {gate}" in plan and f"the cluster runs {gate}" in plan, plan
    assert plan.index(gate) < plan.index("container clusters create")


def test_a_multi_slice_items_rule_names_each_slices_pool(capsys):
    capacity = ("--capacity", "reservation:res-a,spot", "--set", "ray.worker.tpu.slices=2")
    (cls,) = yaml.safe_load_all(_printed(capsys, "compute-class", *capacity))
    assert cls["spec"]["priorities"] == [
        {"nodepools": ["tpu-ray-v6e-16-res-0", "tpu-ray-v6e-16-res-1"]},
        {"nodepools": ["tpu-ray-v6e-16-spot-0", "tpu-ray-v6e-16-spot-1"]},
    ]
    assert undocumented(cls, COMPUTE_CLASS) == []


def test_a_shared_reservations_pool_names_its_owner(capsys):
    capacity = ("--capacity", "reservation:projects/owner-proj/reservations/res-b,spot")
    plan = _printed(capsys, "plan", *capacity).replace(" \\\n    ", " ")
    (create,) = [ln for ln in plan.splitlines() if "node-pools create tpu-ray-v6e-16-res" in ln]
    assert "--reservation=projects/owner-proj/reservations/res-b" in create
    (cls,) = yaml.safe_load_all(_printed(capsys, "compute-class", *capacity))
    assert cls["spec"]["priorities"][0] == {"nodepools": ["tpu-ray-v6e-16-res-0"]}
    assert undocumented(cls, COMPUTE_CLASS) == []


def test_each_queue_flavor_selects_only_its_own_items_pools(capsys):
    """Under Kueue each item's pools carry the plan's capacity label and its flavor selects it:
    a flavor of GKE's labels alone matched, for on demand, the reservation's and Spot's nodes too
    (GKE labels those, not on-demand ones). Each flavor's labels are checked against every pool's
    nodes as the plan makes them (its --node-labels and GKE's labels for its capacity)."""
    from launcher.core.tpu.capacity import CAPACITIES, POOL_CAPACITY_LABEL
    from launcher.core.tpu.table import GKE_ACCELERATOR_LABEL, GKE_TOPOLOGY_LABEL

    flags = ("--capacity", "reservation:res-a,on-demand,spot", "--set", QUEUED[1])
    plan = _printed(capsys, "plan", *flags).replace(" \\\n    ", " ")
    nodes = {}
    for line in plan.splitlines():
        if line.strip().startswith("gcloud container node-pools create tpu-ray"):
            words = line.split()
            (label,) = [w.split("=", 1)[1] for w in words if w.startswith("--node-labels=")]
            key, capacity = label.split("=")
            assert key == POOL_CAPACITY_LABEL
            reservation = next((w.split("=", 1)[1] for w in words if "--reservation=" in w), None)
            nodes[words[4]] = {
                GKE_ACCELERATOR_LABEL: "tpu-v6e-slice",
                GKE_TOPOLOGY_LABEL: "4x4",
                **CAPACITIES[capacity].labels_for(reservation),  # GKE's own
                key: capacity,
            }
    assert len(nodes) == 3, plan
    objects = list(yaml.safe_load_all(_printed(capsys, "queue", *flags)))
    flavors = [
        o for o in objects if o["kind"] == "ResourceFlavor" and o["metadata"]["name"] != "cpu"
    ]
    for flavor in flavors:
        wanted = flavor["spec"]["nodeLabels"]
        landed = [n for n, labels in nodes.items() if wanted.items() <= labels.items()]
        assert len(landed) == 1, (flavor["metadata"]["name"], landed)
        assert wanted[POOL_CAPACITY_LABEL] in flavor["metadata"]["name"]


def test_the_queue_tries_the_flavors_in_order_and_asks_gke_only_for_flex_start(capsys):
    flags = ("--capacity", "reservation:res-a,on-demand,spot,flex-start", "--set", QUEUED[1])
    objects = list(yaml.safe_load_all(_printed(capsys, "queue", *flags, "--quota-slices", "1")))
    (queue,) = [o for o in objects if o["kind"] == "ClusterQueue"]
    (tpu_group,) = [
        g for g in queue["spec"]["resourceGroups"] if "google.com/tpu" in g["coveredResources"]
    ]
    order = [f["name"] for f in tpu_group["flavors"]]
    assert order == [
        "tpu-v6e-4x4-reservation-res-a",
        "tpu-v6e-4x4-on-demand",
        "tpu-v6e-4x4-spot",
        "tpu-v6e-4x4-flex-start",
    ]
    assert all(
        f["resources"] == [{"name": "google.com/tpu", "nominalQuota": 16}]
        for f in tpu_group["flavors"]
    )
    assert queue["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "TryNextFlavor",
        "whenCanPreempt": "TryNextFlavor",
    }
    # GKE's provisioning check for the flex-start flavor only.
    assert "admissionChecks" not in queue["spec"]
    assert queue["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "team-a-flex-start", "onFlavors": ["tpu-v6e-4x4-flex-start"]}]
    }
    flavors = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceFlavor"}
    assert (
        flavors["tpu-v6e-4x4-reservation-res-a"]["spec"]["nodeLabels"][
            "cloud.google.com/reservation-name"
        ]
        == "res-a"
    )
    assert (
        flavors["tpu-v6e-4x4-flex-start"]["spec"]["nodeLabels"]["cloud.google.com/gke-queued"]
        == "true"
    )


def test_one_reservation_item_on_the_command_line_is_the_single_capacity(capsys):
    plan = _printed(capsys, "plan", "--capacity", "reservation:res-z").replace(" \\\n    ", " ")
    (create,) = [
        ln
        for ln in plan.splitlines()
        if ln.strip().startswith("gcloud container node-pools create tpu-ray")
    ]
    assert "tpu-ray-v6e-16-0 " in create  # one pool, named as before
    assert "--reservation-affinity=specific --reservation=res-z" in create
