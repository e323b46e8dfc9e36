"""A RayJob release's job (`ray.job.args`), checked as `submit` checks a job before it is sent:
the same parse and plan, on the slice the RayJob's own cluster asks for. A RayJob runs its job
only once KubeRay has made its cluster, so a misspelt key found there costs the TPU hosts'
start-up; found here, it costs nothing."""

from __future__ import annotations

import shlex
from typing import Any

from launcher.client.jobs.release_data import data_seen_here
from launcher.core.errors import UsageError
from launcher.core.job.plan import parse_job_args, plan_job
from launcher.core.job.run_requests import TRAIN_ENTRYPOINT
from launcher.core.release_facts import NO_RELEASE, ReleaseFacts
from launcher.core.tpu.slices import TpuSlices, worker_group_slices


def rayjob_args(rayjob: dict[str, Any]) -> list[str]:
    """The job's arguments, as the RayJob's entrypoint hands them to `train`."""
    words = shlex.split(rayjob["spec"]["entrypoint"])
    if words[: len(TRAIN_ENTRYPOINT)] != TRAIN_ENTRYPOINT:
        raise ValueError(f"the RayJob's entrypoint does not run {shlex.join(TRAIN_ENTRYPOINT)}")
    return words[len(TRAIN_ENTRYPOINT) :]


def rayjob_slices(rayjob: dict[str, Any]) -> TpuSlices | None:
    """The TPU slices the RayJob's cluster asks for (its first TPU worker group)."""
    groups = worker_group_slices(rayjob["spec"].get("rayClusterSpec", {}))
    return groups[0][0] if groups else None


def check_rayjobs(docs: list[dict[str, Any]]) -> None:
    """Raises the job's own UsageError (the key and the fix, as `submit` says it), under
    ray.job.args, for the first RayJob in a release's rendered objects whose job is refused."""
    for doc in docs:
        if doc.get("kind") != "RayJob":
            continue
        args = rayjob_args(doc)
        try:
            job = parse_job_args(args)
            spec = doc["spec"].get("rayClusterSpec", {})
            release = ReleaseFacts.of_cluster_spec(spec, "the RayJob's head") or NO_RELEASE
            with data_seen_here(job, release.bucket) as seen:
                plan_job(
                    job.with_release(release),
                    list(job.maxtext_argv),
                    target=rayjob_slices(doc),
                    data_root=seen[0] if seen else None,
                    hosts_data_root=seen[1] if seen else None,
                    release=release,
                )
        except UsageError as err:
            raise UsageError(f"ray.job.args: {err.field}", err.problem, err.fix) from err
