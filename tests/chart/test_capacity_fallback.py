"""A capacity fallback, `capacity: [reservation:NAME, on-demand, spot]`, as the chart renders it
and `gke plan`, `gke compute-class` and `gke queue` make it: a GKE ComputeClass whose priorities
are the items in order (the pods select the class), or Kueue's flavors in that order (the pods
select no capacity: Kueue adds the admitting flavor's labels). GKE cannot run here: the
ComputeClass is checked against the fields GKE's reference documents, written below as facts;
the pools' flags go through gcloud's own parser (test_gke_authorities); Kueue's walk along the
flavors runs in the real Kueue (tests/cluster/test_kueue_queue.py)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from harness.helm import CHART, by_kind, helm, refused, render
from harness.paths import REPO
from launcher import cli

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
AFFINITIES = ("Specific", "AnyBestEffort", "None")


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
    tpu = {"type": "tpu-v6e-slice", "count": 4, "topology": "4x4"}
    assert spec["priorities"] == [
        {"tpu": tpu, "reservations": {"affinity": "Specific", "specific": [{"name": "res-a"}]}},
        {"tpu": tpu},
        {"tpu": tpu, "spot": True},
    ]
    assert spec["whenUnsatisfiable"] in WHEN_UNSATISFIABLE
    assert spec["nodePoolAutoCreation"] == {"enabled": False}  # the pools gke plan makes
    assert all(
        r.get("reservations", {}).get("affinity", "None") in AFFINITIES for r in spec["priorities"]
    )


def test_a_shared_reservation_in_the_class_names_its_owner(capsys):
    capacity = ("--capacity", "reservation:projects/owner-proj/reservations/res-b,spot")
    (cls,) = yaml.safe_load_all(_printed(capsys, "compute-class", *capacity))
    assert cls["spec"]["priorities"][0]["reservations"]["specific"] == [
        {"name": "res-b", "project": "owner-proj"}
    ]
    assert undocumented(cls, COMPUTE_CLASS) == []


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
