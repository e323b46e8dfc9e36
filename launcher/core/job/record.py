"""One job, as the workstation shows it and the driver records it: `list --json`'s row, `status
--json`'s answer and the history file's record (launcher.core.job.history) are each a JobRecord,
written and read by this code on both sides of the process boundary. A renamed key is a type
error here, not a silent None there."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from launcher.core.job.goodput import Goodput
from launcher.core.tpu.prices import JobCost

RUNNING = "RUNNING"  # a job's state while its driver runs (Ray's word, and the history's)


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    state: str  # Ray's: PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED
    run: str | None = None
    step: int | None = None  # the last step logged (1-based, as the progress line counts)
    total_steps: int | None = None
    started_at: float | None = None  # seconds since the epoch
    duration_seconds: float | None = None  # so far, for a job that has not ended
    message: str | None = None  # Ray's word on the job (None where Ray is not asked)
    goodput: Goodput | None = None  # the result line's, or the figures so far
    # What its chips cost: the result line's; None while it runs, or where no price is known.
    cost: JobCost | None = None
    # The chips' last verdict (job_events.last_devices: verdict, hosts, line); None before any.
    devices: dict[str, Any] | None = None
    # Each restart, with its cause (launcher.core.tpu.preemption.Restart's JSON): the result
    # line's, as the summary says them; None while the job runs.
    restarts: list[dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        found = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        found["goodput"] = self.goodput.to_json() if self.goodput else None
        found["cost"] = self.cost.to_json() if self.cost else None
        return found

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRecord:
        """A record from its JSON (a history file holds more keys: those are not the record's)."""
        fields: dict[str, Any] = {f.name: data.get(f.name) for f in dataclasses.fields(cls)}
        goodput, cost = fields["goodput"], fields["cost"]
        return cls(
            **{
                **fields,
                "state": fields["state"] or "UNKNOWN",
                "goodput": Goodput.from_json(goodput) if goodput else None,
                "cost": JobCost.from_json(cost) if cost else None,
            }
        )


# What `list --json` and `status --json` print of every job, in order (their --help says it).
FIELDS = tuple(f.name for f in dataclasses.fields(JobRecord))
