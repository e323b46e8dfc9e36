"""The preemption notice as Ray takes it: a drain of the node with reason PREEMPTION and a deadline.
The chart's preStop hook, `tpu-launcher local preempt` and a worker stopped by a bare SIGTERM all
send this one; Ray Train hands it to every worker and charges the restart to
max_preemption_failures."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from launcher.core.job.goodput import Attempt

DRAIN_REASON = "DRAIN_NODE_REASON_PREEMPTION"

# The chart's default grace period for worker pods (ray.worker.terminationGracePeriodSeconds; a
# chart test holds the two equal): Kubernetes' own default, and GKE's notice to a Spot VM.
DEFAULT_GRACE_S = 30
# Of a Spot VM's 30 s notice GKE's graceful node shutdown gives non-system pods 15 s, whatever
# their grace period, unless the node pool extends it. GKE's "Spot VMs": "By default, ... 30
# seconds ... the first 15 seconds to shut down your Pods, then 15 seconds for critical system
# Pods. You can extend the graceful termination period to up to 120 seconds"; for Standard node
# pools through the node system configuration, with the control plane on GKE 1.35.0-gke.1171000
# or later.
# GKE's API takes only some node shutdowns (NodeKubeletConfig.shutdownGracePeriodSeconds: "This
# field is only valid for Spot VMs. Allowed values: 0, 30, 120."): a pool that extends it takes
# the longest, and its pods get that less the critical pods' part.
SPOT_POD_SHUTDOWN_S = 15
SPOT_SHUTDOWN_MAX_S = 120
SPOT_CRITICAL_PODS_S = 15  # what the critical system pods keep of the node's shutdown
SPOT_SHUTDOWN_MIN_GKE = "1.35.0-gke.1171000"
# What the worker pod's preStop hook keeps back from the grace period: the drain's round trip and
# the kubelet's SIGKILL margin. The save has the rest.
PRESTOP_MARGIN_S = 5
# The in-cluster command the chart's preStop hook runs (python -m launcher ...).
NOTICE_COMMAND = "preemption-notice"


def drain_args(address: str | None, node_id: str | None, seconds: float, message: str) -> list[str]:
    """`ray drain-node` for a node going in `seconds` (None node: the one it runs on)."""
    return [
        "ray",
        "drain-node",
        *([f"--address={address}"] if address else []),
        *([f"--node-id={node_id}"] if node_id else []),
        f"--reason={DRAIN_REASON}",
        f"--reason-message={message}",
        f"--deadline-remaining-seconds={max(0, round(seconds))}",
    ]


def pod_grace_seconds(pod: dict[str, Any]) -> int | None:
    """The grace period a worker pod template gives a save: its terminationGracePeriodSeconds
    where a container's preStop hook sends the notice; None where none does (a reclaim then
    resumes from the periodic checkpoint)."""
    for container in pod.get("containers", []):
        hook = (container.get("lifecycle") or {}).get("preStop") or {}
        if NOTICE_COMMAND in (hook.get("exec") or {}).get("command", []):
            return int(pod.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S))
    return None


@dataclass(frozen=True)
class Restart:
    """Why the worker group started again, and what it cost in steps."""

    start: int  # the start it led to: 2 for the first restart
    cause: str  # PREEMPTED, HUNG or FAILED
    notice_seconds: float | None  # from the notice to its deadline (None: none reached the job)
    saved_step: int | None  # the step saved on the notice (None: no save in time)
    resumed_at: int | None  # the first step the next start computed
    recomputed: int  # steps computed before the restart and again after it
    # HUNG: what the hosts' watchdogs recorded ({"rank", "step", "gap", "frozen"}), first first.
    hang: dict[str, Any] | None = None
    # FAILED after a notice on capacity GKE does not take back (on-demand, a reservation): the
    # capacity, as the host recorded it (launcher.runtime.cluster.node_capacity).
    noticed_on: str | None = None
    # The hosts the notices in its window named (`<slice>/<worker id>`; empty: none named).
    hosts: tuple[str, ...] = ()

    def describe(self) -> str:
        went = f" ({', '.join(self.hosts)} taken back)" if self.hosts else ""
        if self.resumed_at is None:  # a script that reports no steps: what it redid is its own
            why = {PREEMPTED: f"preempted{went}", HUNG: "a hang"}.get(self.cause, "a failure")
            return (
                f"start {self.start}: {why}; the script reports no steps, so where it went on "
                "from (its own checkpoints, if any) is not known to the launcher"
            )
        resumed = f"resumed at step {self.resumed_at}"
        again = f"{self.recomputed} step{'' if self.recomputed == 1 else 's'} computed again"
        if self.cause == FAILED and self.noticed_on is not None:
            saved = f"step {self.saved_step} saved on it; " if self.saved_step is not None else ""
            return (
                f"start {self.start}: a failure: a notice on {self.noticed_on} capacity (a "
                f"maintenance event or a scale-down, not a reclaim); {saved}{resumed}, {again}"
            )
        if self.cause == FAILED:
            return f"start {self.start}: a failure; {resumed} from the last checkpoint, {again}"
        if self.cause == HUNG and self.hang is not None:
            frozen = self.hang.get("frozen") or []
            who = (
                f"host{'s' if len(frozen) > 1 else ''} {', '.join(map(str, frozen))} frozen"
                if frozen
                else "every host alive and waiting"
            )
            return (
                f"start {self.start}: a hang (no step for {self.hang['gap']:.0f}s after step "
                f"{self.hang['step']}; {who}); {resumed} from the last checkpoint, {again}"
            )
        if self.saved_step is not None:
            return (
                f"start {self.start}: preempted{went}, {self.notice_seconds:.0f} s notice; step "
                f"{self.saved_step} saved on it; {resumed}, {again}"
            )
        why = (
            "no notice reached the job before the host went"
            if self.notice_seconds is None
            else f"the {self.notice_seconds:.0f} s notice was too short to save"
        )
        return (
            f"start {self.start}: preempted{went}, {why}; {resumed} from the last periodic "
            f"checkpoint, {again} (a longer grace period saves them: "
            "ray.worker.terminationGracePeriodSeconds)"
        )


PREEMPTED, HUNG, FAILED = "preempted", "hung", "failed"
# The restarts line: each cause, as it is named, and the flag that budgets it.
RESTART_CAUSES = (
    (PREEMPTED, "preemption", "--max_preemptions"),
    (FAILED, "failure", "--max_failures"),
    (HUNG, "hang", "--max_hangs"),
)


def format_restarts(found: Sequence[Restart]) -> list[str]:
    """The summary's (and `status`'s) restarts: the count by cause, then each one."""
    if not found:
        return []
    causes = [r.cause for r in found]
    counts = ", ".join(
        f"{causes.count(cause)} {noun}{'' if causes.count(cause) == 1 else 's'} ({flag})"
        for cause, noun, flag in RESTART_CAUSES
    )
    return [f"restarts:     {counts}", *(f"  {r.describe()}" for r in found)]


def restarts(
    attempts: list[Attempt],
    notices: list[dict[str, Any]],
    drains: Sequence[float] = (),
    hang_records: Sequence[dict[str, Any]] = (),
) -> list[Restart]:
    """Each restart between consecutive starts (launcher.core.job.goodput.Attempt, with steps),
    from the preemption notices the hosts recorded ({"at", "deadline"}), when each host Ray saw
    die drained for preemption during the job went (a notice too short to reach a worker leaves
    only that), and the hang watchdogs' records ({"at", "rank", "step", ...}).

    Every cause comes from what happened inside the restart's own window, from its start to the
    next: read while the job runs (the driver's metrics, every 10 s), a host drained after the
    last start that trained belongs to a restart not seen yet, and names none before it. (A
    count of drained hosts, with no time, once named the killed host's restart before a noticed
    preemption's next start trained: the restarts counter, which cannot count back, kept it.)"""
    found = []
    # A start that never trained is no restart of a job that reports steps (a group torn down
    # in its start-up); a script that reports none (torchrun's) has only its starts to count.
    stepped = [a for a in attempts if a.steps]
    ordered = sorted(stepped or attempts, key=lambda a: a.started_at)
    windows = list(itertools.pairwise(ordered))
    # The notices heard in each restart's window, and the first of them (None: none).
    heard = [[x for x in notices if a.started_at <= x["at"] < b.started_at] for a, b in windows]
    firsts = [min(h, key=lambda x: x["at"], default=None) for h in heard]
    for n, ((attempt, nxt), notice, window) in enumerate(
        zip(windows, firsts, heard, strict=True), start=2
    ):
        saved = None
        # MaxText stops after the save on the notice: the last one. A notice with no time to
        # save (its deadline at its arrival) saves nothing: a periodic checkpoint that commits
        # in the moment before the host goes is not the notice's.
        no_time = (
            notice is not None
            and notice.get("deadline") is not None
            and (notice["deadline"] <= notice["at"])
        )
        if notice is not None and not no_time:
            saved = max((s for s, at in attempt.checkpoints if at >= notice["at"]), default=None)
        done = max(
            attempt.steps[-1].step if attempt.steps else -1,
            attempt.last_step if attempt.last_step is not None else -1,
            saved if saved is not None else -1,
        )
        resumed = nxt.steps[0].step if nxt.steps else None
        hung = sorted(
            (h for h in hang_records if attempt.started_at <= h["at"] < nxt.started_at),
            key=lambda h: h["at"],
        )
        # A notice in this restart's window names it, as does a host drained for preemption
        # in it that no hang record explains.
        drained = any(attempt.started_at <= d < nxt.started_at for d in drains)
        preempted = notice is not None or (drained and not hung)
        # A notice on capacity that is not taken back (the host said so): no preemption. The
        # notice's save still counts; the restart is charged as a failure.
        not_reclaimed = notice is not None and notice.get("preemptible") is False
        cause = PREEMPTED if preempted else HUNG if hung else FAILED
        named = {h for x in window for h in x.get("hosts", ())}
        found.append(
            Restart(
                start=n,
                cause=FAILED if not_reclaimed else cause,
                notice_seconds=max(0.0, notice["deadline"] - notice["at"])
                if notice and notice.get("deadline")
                else None,
                saved_step=saved,
                resumed_at=resumed,
                recomputed=max(0, done - resumed + 1) if resumed is not None else 0,
                hang=hung[0] if hung and not preempted else None,
                noticed_on=notice.get("capacity") if not_reclaimed and notice else None,
                hosts=tuple(sorted(named)),
            )
        )
    return found
