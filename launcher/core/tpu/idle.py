"""A standing release that gives its idle TPU slices back (ray.worker.tpu.releaseIdleAfterSeconds)
and asks for them again when a job wants them, a whole slice at a time: the idle check beside the
head and a job's driver, from the release's facts (launcher.core.release_facts.IdleRelease).

Ray's own autoscaler does not do this safely for multi-host slices with Ray 2.60 and KubeRay
1.6.2 (docs/jobs.md, "Idle slices"): here the worker group's `replicas` is set directly, which
KubeRay applies to whole replica groups (all of a slice's hosts), and nothing else scales it.
"""

from __future__ import annotations

from dataclasses import dataclass

# A Ray job in one of these states wants the slices (Ray's JobStatus).
ACTIVE_JOB_STATES = frozenset({"PENDING", "RUNNING"})
POLL_S = 15.0


@dataclass
class QuietClock:
    """When the cluster has had no active job for `after_s` seconds. Anything unknown (the jobs
    could not be read) counts as active: a slice is never given back on a guess."""

    after_s: float
    quiet_since: float | None = None

    def observe(self, active: bool | None, now: float) -> bool:
        """Records one look at the jobs (None: could not tell); True when the slices may go."""
        if active is None or active:
            self.quiet_since = None
            return False
        if self.quiet_since is None:
            self.quiet_since = now
        return now - self.quiet_since >= self.after_s
