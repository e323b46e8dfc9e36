"""The launcher reads a values file as Helm does: over the chart's defaults. For every values file
(and one that names nothing about its slice), the slice and the grace period `submit --values`
and `preflight --values` resolve are those of the worker group `helm template` renders, so a job
is preflighted for, and bound to, the slice the release really has."""

from __future__ import annotations

import pytest

from harness.helm import VALUES_FILES, render
from launcher.client.jobs.slice_target import resolve_target
from launcher.core.errors import UsageError
from launcher.core.tpu.preemption import pod_grace_seconds
from launcher.core.tpu.slices import worker_group_slices

pytestmark = pytest.mark.chart


def _rendered(values) -> tuple[object, int | None] | None:
    """(slices, grace) of the first TPU worker group Helm renders, or None without one."""
    docs = render(values)
    clusters = [d["spec"] for d in docs if d["kind"] == "RayCluster"]
    clusters += [d["spec"]["rayClusterSpec"] for d in docs if d["kind"] == "RayJob"]
    groups = [g for c in clusters for g in worker_group_slices(c)]
    return (groups[0][0], pod_grace_seconds(groups[0][1])) if groups else None


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda p: p.name)
def test_a_values_files_slice_is_the_one_helm_renders(values):
    rendered = _rendered(values)
    if rendered is None:  # no TPU worker group (cpu.yaml, serving only): refused, with why
        with pytest.raises(UsageError, match=r"describes no TPU worker group \(ray\.worker\.tpu\)"):
            resolve_target([str(values)], None, "default")
        return
    target = resolve_target([str(values)], None, "default")
    assert target is not None and (target.slices, target.facts.grace_seconds) == rendered


def test_what_a_values_file_leaves_out_is_the_charts_default(tmp_path):
    bare = tmp_path / "bucket-only.yaml"
    bare.write_text("global:\n  gcsfuse:\n    bucketName: my-ckpts\n")
    target = resolve_target([str(bare)], None, "default")
    assert target is not None and (target.slices, target.facts.grace_seconds) == _rendered(bare)
    assert target.slices.shape.name == "v6e-16"  # the chart's default slice
