"""Ray Train's failure policy with a third budget: a worker group that ended because a host's
hang watchdog ended its process is charged to --max_hangs, not to --max_failures (a hang is no
bug in the job, and a flaky interconnect should not use up the budget for crashes). And a
preemption notice on capacity GKE does not take back (on-demand, a reservation: the hosts
recorded it with their capacity, launcher.runtime.cluster.node_capacity) is a maintenance event or a
scale-down: Ray would charge its restart to --max_preemptions, this policy to --max_failures.

Ray Train 2.60 builds its policy from FailureConfig alone, so the launcher's trainer swaps that
one factory for the duration of its `fit` (with_hang_budget, through
launcher.runtime.borrowed.ray); the policy is pickled to the controller actor, which reads the
hosts' hang records from Ray's KV store."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from ray.train.v2.api.config import FailureConfig
from ray.train.v2.api.exceptions import TrainingFailedError, WorkerGroupError

from launcher.runtime.borrowed import ray as borrowed_ray

FailureDecision = borrowed_ray.failure_decision()
logger = logging.getLogger(borrowed_ray.failure_policy_logger())


def hang_keys(summary_key: str) -> set[str]:
    from launcher.runtime.job import kv as job_kv

    return set(job_kv.keys(job_kv.JobKeys(summary_key).hang()))


def notice_records(summary_key: str) -> dict[str, dict]:
    from launcher.runtime.job import kv as job_kv

    return job_kv.records(job_kv.JobKeys(summary_key).notice())


class HangBudgetPolicy(borrowed_ray.default_failure_policy()):  # type: ignore[misc]
    """Ray's default policy, except for a worker group error that follows new hang records: a
    hang restart, retried while the hangs so far are within `max_hangs` (-1: no limit); and
    for a preemption whose new notices all came from capacity GKE does not take back: a
    failure, within max_failures."""

    def __init__(
        self,
        failure_config: FailureConfig,
        max_hangs: int,
        summary_key: str,
        records: Callable[[str], set[str]] = hang_keys,
        notices: Callable[[str], dict[str, dict]] = notice_records,
    ):
        super().__init__(failure_config)
        self.max_hangs, self.summary_key, self.records = max_hangs, summary_key, records
        self.notices = notices
        self.hangs = 0
        self._seen: set[str] = set()
        self._notices_seen: set[str] = set()

    def _not_reclaimed(self) -> str | None:
        """The capacity of the notices since the last decision where every one came from a
        host on capacity GKE does not take back; None otherwise (none, or any reclaim)."""
        found = self.notices(self.summary_key)
        new = [found[k] for k in sorted(set(found) - self._notices_seen)]
        self._notices_seen |= set(found)
        if new and all(n.get("preemptible") is False for n in new):
            return str(new[0].get("capacity"))
        return None

    def make_decision(self, training_failed_error: TrainingFailedError) -> Any:
        if borrowed_ray.is_preemption_failure(training_failed_error):
            capacity = self._not_reclaimed()
            if capacity is None:
                return super().make_decision(training_failed_error)
            count, most = borrowed_ray.charge_as_failure(self)
            decision = FailureDecision.RETRY if count <= most else FailureDecision.RAISE
            logger.info(
                f"[FailurePolicy] {decision.value}\n  Source: failure (a notice on {capacity} "
                "capacity: a maintenance event or a scale-down, not a reclaim)\n"
                f"  Error count: {count} (max allowed: {most}, --max_failures)\n"
                f"Error: {training_failed_error}"
            )
            return decision
        if not isinstance(training_failed_error, WorkerGroupError):
            return super().make_decision(training_failed_error)
        new = self.records(self.summary_key) - self._seen
        if not new:
            return super().make_decision(training_failed_error)
        self._seen |= new
        self.hangs += 1
        within = self.max_hangs < 0 or self.hangs <= self.max_hangs
        decision = FailureDecision.RETRY if within else FailureDecision.RAISE
        limit = "no limit" if self.max_hangs < 0 else self.max_hangs
        # Ray's own wording, which `submit` shows with the lines that say why.
        logger.info(
            f"[FailurePolicy] {decision.value}\n  Source: hang (a host's watchdog ended it)\n"
            f"  Error count: {self.hangs} (max allowed: {limit}, --max_hangs)\n"
            f"Error: {training_failed_error}"
        )
        return decision


@contextlib.contextmanager
def with_hang_budget(max_hangs: int, summary_key: str) -> Iterator[None]:
    """While inside, JaxTrainer.fit builds a HangBudgetPolicy from its FailureConfig."""

    def create_failure_policy(failure_config: FailureConfig) -> HangBudgetPolicy:
        return HangBudgetPolicy(failure_config, max_hangs, summary_key)

    with borrowed_ray.failure_policy_factory(create_failure_policy):
        yield
