"""Idle slices given back, and asked for again (launcher.core.tpu.idle).

`python -m launcher.runtime idle-release` runs beside the Ray head: every POLL_S seconds it asks
Ray's job API whether a job is pending or running, and once none has been for the release's quiet
period it sets the TPU worker group's replicas to 0; KubeRay then deletes every host of every slice
(a replica group goes whole) and GKE's autoscaler removes the idle nodes. A job's driver asks for
its slices again before it starts (`ask_for`): replicas back up, KubeRay makes whole slices, and Ray
Train waits for them. Both patches test the replicas they read first, so a patch raced by the other
side fails instead of undoing it.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from launcher.core.ray_auth import DASHBOARD_PORT, auth_headers
from launcher.core.release_facts import IdleRelease
from launcher.core.tpu.idle import ACTIVE_JOB_STATES, POLL_S, QuietClock
from launcher.runtime.cluster.kube_api import KubeApi

HEAD_DASHBOARD = f"http://127.0.0.1:{DASHBOARD_PORT}"  # the head's own job API, from beside it


def _group(api: KubeApi, release: IdleRelease) -> tuple[int, int]:
    """The worker group's index in the RayCluster and its replicas now."""
    groups = api.raycluster(release.cluster)["spec"].get("workerGroupSpecs", [])
    for i, group in enumerate(groups):
        if group["groupName"] == release.group:
            return i, int(group.get("replicas", 0))
    raise LookupError(f"RayCluster {release.cluster} has no worker group {release.group}")


def _set_replicas(api: KubeApi, release: IdleRelease, index: int, read: int, to: int) -> None:
    path = f"/spec/workerGroupSpecs/{index}/replicas"
    api.patch_raycluster(
        release.cluster,
        [{"op": "test", "path": path, "value": read}, {"op": "add", "path": path, "value": to}],
    )


def ask_for(api: KubeApi, release: IdleRelease, slices: int) -> int | None:
    """Makes sure the worker group asks for `slices` slices; returns how many it asked for
    before when that was fewer (None: they were asked for already)."""
    index, replicas = _group(api, release)
    if replicas >= slices:
        return None
    _set_replicas(api, release, index, replicas, slices)
    return replicas


def give_back(api: KubeApi, release: IdleRelease) -> int:
    """Sets the worker group's replicas to 0; returns how many slices it had."""
    index, replicas = _group(api, release)
    if replicas:
        _set_replicas(api, release, index, replicas, 0)
    return replicas


def jobs_active(address: str = HEAD_DASHBOARD) -> bool | None:
    """Whether any Ray job is pending or running (None: the job API did not answer)."""
    request = urllib.request.Request(f"{address}/api/jobs/", headers=auth_headers())
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            jobs = json.load(resp)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return any(job.get("status") in ACTIVE_JOB_STATES for job in jobs)


def watch(
    api: KubeApi,
    release: IdleRelease,
    active: Callable[[], bool | None] = jobs_active,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    rounds: int | None = None,
) -> None:
    """The idle check's loop (`rounds`: how many looks, for tests; None: forever)."""
    quiet = QuietClock(release.after_s)
    print(
        f"idle-release: {release.cluster}/{release.group}: slices go after "
        f"{release.after_s:.0f} s with no pending or running job; a job asks for them again",
        flush=True,
    )
    done = 0
    while rounds is None or done < rounds:
        done += 1
        try:
            # A job submitted after this look is PENDING until its driver runs, and its driver
            # asks for the slices (ask_for) after any patch made here.
            if quiet.observe(active(), clock()) and (had := give_back(api, release)):
                print(
                    f"idle-release: no job for {release.after_s:.0f} s: gave back {had} "
                    f"slice(s) of {release.cluster}/{release.group}",
                    flush=True,
                )
        except (urllib.error.URLError, OSError, LookupError, ValueError) as e:
            # The API server or a racing patch: keep the slices, look again.
            print(f"idle-release: {e}; keeping the slices, looking again", file=sys.stderr)
            quiet.observe(None, clock())  # not knowing starts the quiet period again
        sleep(POLL_S)
