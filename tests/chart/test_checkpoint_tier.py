"""`checkpoints.tier`: the memory tier's in-memory volume in every TPU worker (not the head), the
directory the launcher reads it from, the jobs' default tier on the head; and the values that
cannot work refused with the reason (launcher.core.job.checkpoint_tiers holds the same rules for a
job, and reads the rendered pods back: HostMemory)."""

from __future__ import annotations

import pytest

from harness.helm import BUCKET, VALUES, by_kind, refused, render
from launcher.core.job.checkpoint_tiers import BUCKET as BUCKET_TIER
from launcher.core.job.checkpoint_tiers import MEMORY, MEMORY_DIR_ENV, MEMORY_VOLUME, TIERS
from launcher.core.quantities import quantity
from launcher.core.release_facts import ReleaseFacts

pytestmark = pytest.mark.chart

MEMORY_TIER = ("--set", "checkpoints.tier=memory", "--set", "checkpoints.memorySize=64Gi")


def _pods(docs: list[dict]) -> tuple[dict, dict]:
    (cluster,) = by_kind(docs, "RayCluster")
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    worker = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    return head, worker


def _env(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["containers"][0].get("env", [])}


def test_the_memory_tier_mounts_a_memory_volume_in_every_tpu_worker():
    head, worker = _pods(render(VALUES / "v6e-16-x2.yaml", *MEMORY_TIER))
    (volume,) = [v for v in worker["volumes"] if v["name"] == MEMORY_VOLUME]
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    (mount,) = [m for m in worker["containers"][0]["volumeMounts"] if m["name"] == MEMORY_VOLUME]
    assert _env(worker)[MEMORY_DIR_ENV] == mount["mountPath"]
    assert ReleaseFacts.from_env(_env(head)).checkpoint_tier == MEMORY
    assert MEMORY_VOLUME not in {v["name"] for v in head.get("volumes", [])}
    # The default tier renders none of it.
    head, worker = _pods(render(VALUES / "v6e-16-x2.yaml"))
    assert MEMORY_VOLUME not in {v["name"] for v in worker["volumes"]}
    assert ReleaseFacts.from_env(_env(head)).checkpoint_tier == BUCKET_TIER
    assert MEMORY_DIR_ENV not in _env(worker)


def test_the_schema_offers_the_launchers_tiers():
    for tier in ("gpu", "Memory"):
        assert "checkpoints/tier" in refused(*BUCKET, "--set", f"checkpoints.tier={tier}")
    assert TIERS == ("bucket", "memory", "multi-tier")  # the schema's enum (ci/schema_enums.py)


@pytest.mark.parametrize(
    ("values", "sets", "said"),
    [
        ("v6e-16-x2.yaml", ("--set", "checkpoints.tier=multi-tier"), "JobSet"),
        ("v6e-16.yaml", MEMORY_TIER, "memory needs 2 slices or more"),
        ("cpu.yaml", MEMORY_TIER, "has no TPU workers"),
        ("v6e-16-x2.yaml", ("--set", "checkpoints.tier=memory"), "tpu-launcher preflight"),
        ("v6e-16-x2.yaml", (*MEMORY_TIER[:2], "--set", "checkpoints.memorySize=250G"),
         "not below the worker's memory limit"),
    ],
)  # fmt: skip
def test_a_tier_that_cannot_work_is_refused_with_the_fix(values, sets, said):
    message = refused(*BUCKET, *sets, values=VALUES / values)
    assert "checkpoints." in message and said in message, message


def test_the_worker_limit_the_refusal_compares_is_the_rendered_one():
    _, worker = _pods(render(VALUES / "v6e-16-x2.yaml", *MEMORY_TIER))
    limit = quantity(worker["containers"][0]["resources"]["limits"]["memory"], memory=True)
    assert quantity("64Gi", memory=True) < limit < quantity("250G", memory=True)
