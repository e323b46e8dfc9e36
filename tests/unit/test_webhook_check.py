"""`helm test`'s reading of the GKE TPU webhook's work on a RayCluster's pods. The pods below are
what the webhook's mutation leaves (kuberay-tpu-webhook's README and source: TPU_WORKER_HOSTNAMES
on every multi-host TPU worker; before v1.3.2, with KubeRay's own replica labels present, a
required pod affinity on `replicaIndex`, a label it no longer sets). The unmutated case is
checked on KubeRay's real pods in tests/cluster."""

from __future__ import annotations

import pytest

from launcher.runtime.cluster.check import webhook_problems

pytestmark = pytest.mark.unit


def _worker(name: str, topology: str = "4x4", chips: int = 4, **extra) -> dict:
    env = extra.pop("env", [{"name": "TPU_WORKER_HOSTNAMES", "value": "tpu-group-0-0.x-headless"}])
    return {
        "metadata": {
            "name": name,
            "labels": {"ray.io/node-type": "worker", **extra.pop("labels", {})},
        },
        "spec": {
            "nodeSelector": {
                "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                "cloud.google.com/gke-tpu-topology": topology,
            },
            "containers": [
                {
                    "name": "ray-worker",
                    "env": env,
                    "resources": {"limits": {"google.com/tpu": chips}},
                }
            ],
            **extra.pop("spec", {}),
        },
        "status": {"phase": extra.pop("phase", "Running")},
    }


OLD_WEBHOOK_AFFINITY = {
    "affinity": {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "replicaIndex", "operator": "In", "values": ["tpu-group-0"]}
                        ]
                    },
                    "topologyKey": "cloud.google.com/gke-nodepool",
                }
            ]
        }
    }
}


def test_mutated_workers_pass():
    assert webhook_problems([_worker(f"w{i}") for i in range(4)]) == []


def test_unmutated_multi_host_workers_name_the_missing_webhook():
    (problem,) = webhook_problems([_worker(f"w{i}", env=[]) for i in range(4)])
    assert "4 multi-host TPU worker pod(s) (w0, w1, w2, ...)" in problem
    assert "Ray operator add-on" in problem


def test_single_host_workers_need_no_hostnames():
    assert webhook_problems([_worker("w0", topology="2x4", chips=8, env=[])]) == []


def test_pending_on_a_replica_index_nobody_carries_names_the_old_webhook():
    pods = [_worker(f"w{i}", phase="Pending", spec=OLD_WEBHOOK_AFFINITY) for i in range(2)]
    (problem,) = webhook_problems(pods)
    assert "older than v1.3.2" in problem and "replicaIndex" in problem


def test_the_same_affinity_is_fine_where_the_label_exists():
    pods = [
        _worker("w0", phase="Pending", spec=OLD_WEBHOOK_AFFINITY, labels={"replicaIndex": "g-0"})
    ]
    assert webhook_problems(pods) == []


def test_no_webhook_at_all_is_named_once():
    (problem,) = webhook_problems([_worker(f"w{i}", env=[]) for i in range(4)])
    assert "no TPU_WORKER_HOSTNAMES" in problem
