"""The slice a job is meant for, resolved once at the edge (a values file is read, a release's
RayCluster asked), then handed down: preflight compiles for it and submit binds the job to it,
so the slice preflight approved is the slice the job runs on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.core.errors import UsageError
from launcher.core.release_facts import ReleaseFacts
from launcher.core.tpu.slices import TpuSlices
from launcher.core.tpu.table import default_chips_per_host

if TYPE_CHECKING:
    from launcher.client.release.helm_release import Release

# The release name a values file's facts are read under (the RayCluster's name derives from it:
# the idle check's target), where only values are given: the README's.
VALUES_RELEASE = "tpu"


@dataclass(frozen=True)
class SliceTarget:
    facts: ReleaseFacts  # what the release tells its jobs (its slices: None, no TPU group)
    source: str  # where it came from, for messages: "values/v6e-16.yaml", "release tpu"
    release: Release | None = None  # the release read, when it came from one (read once)

    @property
    def slices(self) -> TpuSlices | None:
        return self.facts.slices


def resolve_target(
    values: Sequence[str], release: str | None, namespace: str
) -> SliceTarget | None:
    """The target values files or an installed release name; None when neither is given. The
    values files are merged over the chart's own defaults, in order, as Helm reads them: what
    they leave out is the chart's default, not nothing (tests/chart/test_release_facts.py
    holds this against the chart's render)."""
    if values:
        from launcher.client.release.chart_source import packaged_chart
        from launcher.core.values_file import load_values, release_facts, training_slices

        merged = load_values(packaged_chart() / "values.yaml", *values)
        source = " + ".join(values)
        training_slices(merged, source)  # refused, with the fix, where it names no TPU slice
        return SliceTarget(release_facts(merged, release or VALUES_RELEASE), source)
    if release:
        from launcher.client.release.helm_release import Release

        read = Release.read(release, namespace)
        if read.rayjob is not None:
            raise UsageError(
                "--release",
                f"release {release!r} is a RayJob: it runs its own job (ray.job.args) on a "
                "cluster that goes with it",
                "install this job as a release of its own (--set ray.job.enabled=true "
                "--set 'ray.job.args={base.yml,...}'), or submit to a standing cluster's release",
            )
        return SliceTarget(read.facts(), f"release {release}", read)
    return None


def bind_job_to(job_args: list[str], slices: TpuSlices) -> list[str]:
    """The job's arguments with the target slice named first (`--tpu=v6e-16 --num_slices=N`):
    the head then refuses to run it on a cluster of another shape (check_fits_cluster) instead
    of deciding the slice itself. A job that names its slice already was checked against the
    target by plan_job and goes as it is. Where the name alone means another host size (v6e-8
    as two hosts of 4 chips), --chips_per_host says which."""
    shape = slices.shape
    bound = [f"--tpu={shape.name}", f"--num_slices={slices.num_slices}"]
    if shape.chips_per_host != default_chips_per_host(shape.generation, shape.topology):
        bound.append(f"--chips_per_host={shape.chips_per_host}")
    return [*bound, *job_args]
