"""The driver's side of a job's history (launcher.core.job.history): Ray's log of the job and
its record, into the run's directory on the bucket every HISTORY_EVERY_S and when it ends."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.core.job.events import last_devices, last_step
from launcher.core.job.goodput import Goodput
from launcher.core.job.history import HISTORY_EVERY_S, LOG, RECORD, job_dir
from launcher.core.job.record import RUNNING, JobRecord
from launcher.core.tpu.prices import JobCost
from launcher.runtime.periodic import every

# Ray's job supervisor sends the driver's stdout and stderr to this file on the head
# (ray.dashboard.modules.job.common.JOB_LOGS_PATH_TEMPLATE): the log `ray job logs` reads.
DRIVER_LOG = re.compile(r"/job-driver-(?P<id>[^/]+)\.log$")


def driver_log() -> tuple[str, Path] | None:
    """This driver's submission id and the log file Ray keeps of it; None for a driver not
    run by Ray's job API (by hand, in a test)."""
    try:
        target = os.readlink("/proc/self/fd/1")
    except OSError:
        return None
    m = DRIVER_LOG.search(target)
    return (m["id"], Path(target)) if m else None


class JobHistoryWriter:
    """Copies the driver's log to <run>/jobs/<id>/log.txt as it grows and keeps job.json
    current; `outcome` gives the goodput so far (None: not yet known)."""

    def __init__(
        self,
        run_dir: Path,
        submission_id: str,
        driver_log: Path,
        job: JobRecord,
        outcome: Callable[[], Goodput | None] = lambda: None,
    ):
        self.dir = Path(job_dir(str(run_dir), submission_id))
        self.driver_log, self.outcome = driver_log, outcome
        self.job = dataclasses.replace(
            job, job_id=submission_id, state=RUNNING, started_at=time.time()
        )
        # The history's own beside the record: when it was last written, when the job ended,
        # and the job's result record.
        self.updated_at: float | None = None
        self.ended_at: float | None = None
        self.result: dict[str, Any] | None = None
        self._copied = 0
        self._partial = ""
        # Reentrant: finish() may run in a signal handler while the main thread is in update().
        self._lock = threading.RLock()
        self._stop: threading.Event | None = None

    def start(self) -> JobHistoryWriter:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / LOG).write_bytes(b"")
        except OSError as e:  # the bucket is history, not the job: say so, go on
            os.write(2, f"launcher: could not start the job's history: {e}\n".encode())
        self.update()
        self._stop = every(HISTORY_EVERY_S, self.update, "job-history")
        return self

    def update(self) -> None:
        """What the log gained since the last copy, and the record with the last step."""
        with self._lock:
            try:
                self._copy_log()
                self.updated_at = time.time()
                self.job = dataclasses.replace(
                    self.job, duration_seconds=self.updated_at - (self.job.started_at or 0)
                )
                # The summary's own figures once there is one; until then, the figures so far.
                result = self.result or {}
                goodput = result.get("goodput")
                if (now := Goodput.from_json(goodput) if goodput else self.outcome()) is not None:
                    self.job = dataclasses.replace(self.job, goodput=now)
                if cost := result.get("cost"):
                    self.job = dataclasses.replace(self.job, cost=JobCost.from_json(cost))
                if (restarts := (self.result or {}).get("restarts")) is not None:
                    self.job = dataclasses.replace(self.job, restarts=restarts)
                tmp = self.dir / f".{RECORD}.tmp"
                tmp.write_text(json.dumps(self.record(), indent=1))
                tmp.replace(self.dir / RECORD)  # never half a record
            except OSError as e:  # the bucket is history, not the job: say so, go on
                os.write(2, f"launcher: could not write the job's history: {e}\n".encode())

    def _copy_log(self) -> None:
        with self.driver_log.open("rb") as src:
            src.seek(self._copied)
            chunk = src.read()
        if not chunk:
            return
        with (self.dir / LOG).open("ab") as dst:
            dst.write(chunk)
        self._copied += len(chunk)
        text = self._partial + chunk.decode(errors="replace")
        whole, _, self._partial = text.rpartition("\n")
        if (last := last_step(whole)) is not None:
            self.job = dataclasses.replace(self.job, step=last[0], total_steps=last[1])
        if (devices := last_devices(whole)) is not None:
            self.job = dataclasses.replace(self.job, devices=devices)

    def record(self) -> dict[str, Any]:
        """job.json: the job's record, and the history's own keys beside it."""
        return {
            **self.job.to_json(),
            "updated_at": self.updated_at,
            **({"ended_at": self.ended_at} if self.ended_at is not None else {}),
            **({"result": self.result} if self.result is not None else {}),
        }

    def finish_on_sigterm(self) -> JobHistoryWriter:
        """`ray job stop` (and `tpu-launcher stop`) send the driver SIGTERM, then SIGKILL a few
        seconds later (RAY_JOB_STOP_WAIT_TIME_S, 3 by default): the record says STOPPED and
        the log is copied before the driver goes."""

        def stop(signum: int, _frame: object) -> None:
            self.finish("STOPPED", None)
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, stop)
        return self

    def finish(self, state: str, result: dict[str, Any] | None) -> None:
        """The job's end: its state (SUCCEEDED, FAILED) and its result record, the last copy."""
        if self._stop is not None:
            self._stop.set()
        self.job, self.ended_at = dataclasses.replace(self.job, state=state), time.time()
        if result is not None:
            self.result = result
        for out in (sys.stdout, sys.stderr):
            out.flush()
        self.update()
