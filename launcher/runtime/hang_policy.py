"""Ray Train's failure policy with a third budget: a worker group that ended because a host's
hang watchdog ended its process is charged to --max_hangs, not to --max_failures (a hang is no
bug in the job, and a flaky interconnect should not use up the budget for crashes).

Ray Train 2.60 builds its policy from FailureConfig alone, so the launcher's trainer swaps that
one factory for the duration of its `fit` (with_hang_budget, through ray_internals); the policy
is pickled to the controller actor, which reads the hosts' hang records from Ray's KV store."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from ray.train.v2.api.config import FailureConfig
from ray.train.v2.api.exceptions import TrainingFailedError, WorkerGroupError

from launcher.runtime import ray_internals

FailureDecision = ray_internals.failure_decision()
logger = logging.getLogger(ray_internals.failure_policy_logger())


def hang_keys(summary_key: str) -> set[str]:
    from launcher.runtime import job_kv

    return set(job_kv.keys(job_kv.JobKeys(summary_key).hang()))


class HangBudgetPolicy(ray_internals.default_failure_policy()):  # type: ignore[misc]
    """Ray's default policy, except for a worker group error that follows new hang records: a
    hang restart, retried while the hangs so far are within `max_hangs` (-1: no limit)."""

    def __init__(
        self,
        failure_config: FailureConfig,
        max_hangs: int,
        summary_key: str,
        records: Callable[[str], set[str]] = hang_keys,
    ):
        super().__init__(failure_config)
        self.max_hangs, self.summary_key, self.records = max_hangs, summary_key, records
        self.hangs = 0
        self._seen: set[str] = set()

    def make_decision(self, training_failed_error: TrainingFailedError) -> Any:
        if not isinstance(
            training_failed_error, WorkerGroupError
        ) or ray_internals.is_preemption_failure(training_failed_error):
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

    with ray_internals.failure_policy_factory(create_failure_policy):
        yield
