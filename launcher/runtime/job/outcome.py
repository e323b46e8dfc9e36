"""What a training job's driver reads back of its run, whatever the framework: every start's
events (Ray's KV store, written by the workers' shared bookkeeping), as goodput, the starts,
the restarts and their causes, the evals and the loss curve; and the job's history file."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from launcher.core.job.goodput import breakdown, saves_by_tier, startup_timeline
from launcher.core.job.outcome import Outcome, Start, Trained
from launcher.core.job.run_dir import RunDir
from launcher.core.tpu.preemption import restarts


def preempted_hosts() -> dict[str, float]:
    """Ray nodes that died drained for preemption (NodeDeathInfo AUTOSCALER_DRAIN_PREEMPTED),
    each with when it went (the GCS node table's end time; `ray.nodes()` gives no time): a host
    reclaimed before its notice reached a worker shows only here."""
    import ray

    from launcher.runtime.borrowed.ray import preempted_dead_nodes

    return preempted_dead_nodes() if ray.is_initialized() else {}


@dataclass
class JobOutcome:
    """The run's outcome as the driver reads it, at any time while it runs and at its end."""

    summary_key: str  # where the workers put their starts' events
    run_dir: RunDir
    started_at: float  # when the driver started (time.time()): goodput's wall time
    compile_cache_dir: str = "off"
    # Hosts Ray saw die drained for preemption before this job started: not this job's.
    preempted_before: set[str] = field(default_factory=set)

    def begin(self) -> JobOutcome:
        """Just before the workers start: which preempted hosts are not this job's."""
        self.preempted_before = set(preempted_hosts())
        return self

    def read(self, plot: bool = True) -> Outcome:
        """Goodput from every start's events, the loss curve as a sparkline, and (with `plot`)
        the plot (PNG, next to the TensorBoard logs) when there were steps."""
        from launcher.runtime.job.kv import read_attempts, read_hangs, read_notices
        from launcher.runtime.job.plots import loss_sparkline, write_plot

        key = self.summary_key
        attempts = sorted(read_attempts(key), key=lambda a: a.started_at)
        goodput = breakdown(attempts, self.started_at, time.time())
        timelines = startup_timeline(attempts, self.started_at)
        starts = [
            Start(
                slices=a.slices,
                workers=a.workers,
                first_step=a.steps[0].step if a.steps else None,
                last_step=a.steps[-1].step if a.steps else None,
                seconds_to_first_step=round(a.steps[0].logged_at - a.started_at, 1)
                if a.steps
                else None,
                batch_tokens=sorted({p.total_weights for p in a.steps}),
                megascale=a.megascale,
                capacity=a.capacity,
                restored_from=a.restored_from,
                timeline=timeline,
            )
            for a, timeline in zip(attempts, timelines, strict=True)
        ]
        # The last computation of each step (a restart computes some again), and of each eval.
        points = sorted(
            {p.step: p for a in attempts for p in a.steps}.values(), key=lambda p: p.step
        )
        evals = sorted({step: loss for a in attempts for step, loss in a.evals}.items())
        sparkline = plotted = None
        if points and plot:
            sparkline = loss_sparkline([p.loss for p in points])
            try:
                plotted = str(write_plot(points, self.run_dir.plot, evals))
            except OSError as e:  # a plot is not worth failing the job over
                print(f"launcher: could not write the plot: {e}", file=sys.stderr)
        return Outcome(
            goodput=goodput,
            compile_cache={
                "dir": self.compile_cache_dir,
                "hits": sum(a.compile_cache_hits for a in attempts),
                "hits_per_start": [a.compile_cache_hits for a in attempts],
                "compile_seconds_per_start": [round(a.compile_seconds, 2) for a in attempts],
                "saved_seconds": sum(a.compile_seconds_saved for a in attempts),
            },
            saves=saves_by_tier(attempts),
            starts=starts,
            restarts=restarts(
                attempts,
                read_notices(key),
                [at for node, at in preempted_hosts().items() if node not in self.preempted_before],
                read_hangs(key),
            ),
            trained=Trained(len(points), int(sum(p.total_weights for p in points))),
            evals=evals,
            sparkline=sparkline,
            plot=plotted,
        )

    def history(self, run_name: str, total_steps: int | None):
        """The job's history in its run's directory (launcher.core.job.history), written as it
        runs; None for a driver Ray's job API did not start."""
        from launcher.core.job.record import RUNNING, JobRecord
        from launcher.runtime.job.history_writer import JobHistoryWriter, driver_log

        if (found := driver_log()) is None:
            return None
        submission_id, log = found
        return (
            JobHistoryWriter(
                self.run_dir.path,
                submission_id,
                log,
                JobRecord(submission_id, RUNNING, run=run_name, total_steps=total_steps),
                lambda: self.read(plot=False).goodput,
            )
            .start()
            .finish_on_sigterm()
        )
