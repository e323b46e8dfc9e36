"""Ray Train's failure policy with a third budget: a worker group that ended because a host's
hang watchdog ended its process is charged to --max_hangs, not to --max_failures (a hang is no
bug in the job, and a flaky interconnect should not use up the budget for crashes).

Ray Train 2.60 builds its policy from FailureConfig alone (`create_failure_policy` in
ray.train.v2.api.data_parallel_trainer), so the launcher's trainer swaps that one call for the
duration of its `fit` (with_hang_budget); the policy is pickled to the controller actor, which
reads the hosts' hang records from Ray's KV store."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

from ray.train.v2._internal.execution.failure_handling import (
    DefaultFailurePolicy,
    FailureDecision,
    FailurePolicy,
)
from ray.train.v2._internal.execution.failure_handling.default import _is_preemption_failure
from ray.train.v2.api.config import FailureConfig
from ray.train.v2.api.exceptions import TrainingFailedError, WorkerGroupError

from launcher.core import hangs

logger = logging.getLogger("ray.train.v2._internal.execution.failure_handling.default")


def hang_keys(summary_key: str) -> set[str]:
    from launcher.runtime import job_kv

    return set(job_kv.keys(f"{summary_key}/{hangs.HANG_RECORDS}/"))


class HangBudgetPolicy(DefaultFailurePolicy):
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

    def make_decision(self, training_failed_error: TrainingFailedError) -> FailureDecision:
        if not isinstance(training_failed_error, WorkerGroupError) or _is_preemption_failure(
            training_failed_error
        ):
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
    from ray.train.v2.api import data_parallel_trainer

    original = data_parallel_trainer.create_failure_policy

    def create_failure_policy(failure_config: FailureConfig) -> FailurePolicy:
        return HangBudgetPolicy(failure_config, max_hangs, summary_key)

    # Ray annotates the factory with the v1 FailureConfig; JaxTrainer hands it the v2 one.
    data_parallel_trainer.create_failure_policy = create_failure_policy  # type: ignore[assignment]
    try:
        yield
    finally:
        data_parallel_trainer.create_failure_policy = original
