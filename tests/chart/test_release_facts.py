"""What a release tells its jobs (launcher.core.release_facts) read two of its three ways, held
equal: from the chart's render (the env every Ray pod carries: what the head reads) and from
the values files (what preflight reads before anything is installed). The third, the live
release's (`Release.facts()`), is read from the test control plane in
tests/cluster/test_release_reads.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.helm import BUCKET, CHART, VALUES, by_kind, render
from launcher.core.errors import UsageError
from launcher.core.release_facts import RELEASE_ENV, ReleaseFacts
from launcher.core.values_file import load_values, release_facts

pytestmark = pytest.mark.chart

# Each a release a user would install: every preset, and the facts each preset leaves at its
# default set otherwise (the values as the chart's own keys write them).
CASES = {
    "v6e-16": (VALUES / "v6e-16.yaml", {}),
    "v6e-16-x2": (VALUES / "v6e-16-x2.yaml", {}),
    "cpu": (VALUES / "cpu.yaml", {}),
    "v5p-16": (VALUES / "v5p-16.yaml", {}),
    "tpu7x-16": (VALUES / "tpu7x-16.yaml", {}),
    "elastic-idle-memory": (
        VALUES / "v6e-16-x2.yaml",
        {
            "ray": {"worker": {"tpu": {"minSlices": 1, "releaseIdleAfterSeconds": 900}}},
            "checkpoints": {"tier": "memory", "memorySize": "48Gi"},
        },
    ),
    "fallback-priced": (
        VALUES / "v6e-16.yaml",
        {
            "ray": {
                "worker": {
                    "terminationGracePeriodSeconds": 120,
                    "tpu": {
                        "capacity": ["reservation:res-a", "on-demand", "spot"],
                        "capacityFallback": "computeclass",
                    },
                }
            },
            "cost": {"region": "us-east5", "pricesPerChipHour": {"v6e": {"spot": 1.25}}},
        },
    ),
    "no-notice-named": (
        VALUES / "v6e-16.yaml",
        {"ray": {"fullnameOverride": "train", "worker": {"terminationGracePeriodSeconds": None}}},
    ),
}
SETS_BUCKET = {"global": {"gcsfuse": {"bucketName": BUCKET[1].split("=", 1)[1]}}}


def _ray_containers(docs: list[dict]) -> list[dict]:
    (cluster,) = by_kind(docs, "RayCluster")
    spec = cluster["spec"]
    pods = [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]
    return [c for pod in pods for c in pod["spec"]["containers"]]


def _facts_of(container: dict) -> ReleaseFacts:
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    assert RELEASE_ENV in env, f"{container['name']} carries no {RELEASE_ENV}"
    return ReleaseFacts.from_env(env)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_values_and_the_render_tell_the_jobs_the_same(case: str, tmp_path: Path):
    values, extra = CASES[case]
    override = tmp_path / "extra.yaml"
    override.write_text(yaml.safe_dump(extra))
    docs = render(values, "-f", str(override))
    containers = _ray_containers(docs)
    rendered = {c["name"]: _facts_of(c) for c in containers}
    head = rendered["ray-head"]
    # One record on every Ray pod (the head, its idle check, each worker).
    assert all(f == head for f in rendered.values()), rendered
    merged = load_values(CHART / "values.yaml", values, override)
    merged["global"]["gcsfuse"].update(SETS_BUCKET["global"]["gcsfuse"])
    assert release_facts(merged, "tpu") == head
    # What the JSON holds comes back whole.
    assert ReleaseFacts.from_json(head.to_json()) == head


def test_the_facts_say_what_each_case_is_about(tmp_path: Path):
    """The cases above are not all empty: each fact is seen with a value at least once."""

    def facts(case: str) -> ReleaseFacts:
        values, extra = CASES[case]
        override = tmp_path / f"{case}.yaml"
        override.write_text(yaml.safe_dump(extra))
        return _facts_of(_ray_containers(render(values, "-f", str(override)))[0])

    cpu = facts("cpu")
    assert cpu.slices is None and cpu.cpu_slice is not None and cpu.capacities == ()
    elastic = facts("elastic-idle-memory")
    assert (elastic.min_slices, elastic.checkpoint_tier) == (1, "memory")
    assert elastic.host_memory.volume_gib == 48.0 and elastic.offered_slices == elastic.slices
    assert elastic.idle_release is not None and elastic.idle_release.cluster == "tpu-ray"
    assert elastic.bucket is not None and elastic.bucket.mount == "/data"
    priced = facts("fallback-priced")
    assert priced.capacities == ("reservation:res-a", "on-demand", "spot")
    assert (priced.grace_seconds, priced.region) == (120, "us-east5")
    assert priced.prices == {"v6e": {"spot": 1.25}}
    assert facts("no-notice-named").grace_seconds is None


def test_facts_of_another_version_or_shape_are_refused_with_where():
    with pytest.raises(UsageError, match="not version 1") as e:
        ReleaseFacts.from_json('{"version": 99}', "release tpu's LAUNCHER_RELEASE")
    assert "release tpu's LAUNCHER_RELEASE" in str(e.value) and "tpu-launcher install" in str(
        e.value
    )
    with pytest.raises(UsageError, match="checkpoint tier"):
        ReleaseFacts.from_json('{"version": 1, "checkpoint_tier": "disk"}')
    assert ReleaseFacts.from_env({}) == ReleaseFacts()  # the local cluster: no release
