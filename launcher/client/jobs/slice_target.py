"""The slice a job is meant for, resolved once at the edge (a values file is read, a release's
RayCluster asked), then handed down: preflight compiles for it and submit binds the job to it,
so the slice preflight approved is the slice the job runs on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from launcher.core.checkpoint_tiers import HostMemory
from launcher.core.errors import UsageError
from launcher.core.preemption import DEFAULT_GRACE_S
from launcher.core.slices import TpuSlices
from launcher.core.tpu_table import default_chips_per_host

if TYPE_CHECKING:
    from launcher.client.helm_release import Release


@dataclass(frozen=True)
class SliceTarget:
    slices: TpuSlices | None  # None: a release without a TPU worker group (nothing to compile)
    source: str  # where it came from, for messages: "values/v6e-16.yaml", "release tpu"
    grace_seconds: int | None = DEFAULT_GRACE_S  # the workers' (None: they send no notice)
    release: Release | None = None  # the release read, when it came from one (read once)
    capacities: tuple[str, ...] = ()  # the workers' capacity items, in order (() : not known)
    # The release's checkpoint tier and its TPU pods' memory (a job's default tier).
    host_memory: HostMemory = field(default_factory=HostMemory)


def resolve_target(
    values: Sequence[str], release: str | None, namespace: str
) -> SliceTarget | None:
    """The target values files or an installed release name; None when neither is given. The
    values files are merged over the chart's own defaults, in order, as Helm reads them: what
    they leave out is the chart's default, not nothing (a test holds this against `helm
    template` and `gke plan`)."""
    if values:
        from launcher.client.chart_source import packaged_chart
        from launcher.core.values_file import (
            load_values,
            training_slices,
            worker_capacities,
            worker_grace_seconds,
            worker_host_memory,
        )

        merged = load_values(packaged_chart() / "values.yaml", *values)
        source = " + ".join(values)
        slices = training_slices(merged, source)
        grace = worker_grace_seconds(merged)
        return SliceTarget(
            slices,
            source,
            grace,
            capacities=worker_capacities(merged),
            host_memory=worker_host_memory(merged),
        )
    if release:
        from launcher.client.helm_release import Release

        read = Release.read(release, namespace)
        if read.rayjob is not None:
            raise UsageError(
                "--release",
                f"release {release!r} is a RayJob: it runs its own job (ray.job.args) on a "
                "cluster that goes with it",
                "install this job as a release of its own (--set ray.job.enabled=true "
                "--set 'ray.job.args={base.yml,...}'), or submit to a standing cluster's release",
            )

        found, grace = read.workers()
        return SliceTarget(
            found, f"release {release}", grace, read, read.capacities(), read.host_memory()
        )
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
