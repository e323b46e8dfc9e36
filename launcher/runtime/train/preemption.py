"""A preemption notice becomes one committed checkpoint at a step every host agrees on.

A TPU host that is taken back (spot or flex-start reclaim, a maintenance event) is told before it
goes: Ray drains its node with reason PREEMPTION and a deadline (the chart's preStop hook does it
when the pod is terminated; `tpu-launcher local preempt` does it locally; Ray's autoscaler does it).
The relay here hands that notice to JAX as a SIGTERM raised in its own process, which JAX's
preemption service catches (its handler never exits the process); JAX agrees with every host on
the next step they all reach, and MaxText (enable_autocheckpoint=true) saves that step, waits for
the save to commit and stops.

A worker whose MaxText stopped for a preemption must not return (Ray Train takes a clean return
for the run's end): it waits for Ray Train to restart the group at the deadline, which Ray charges
to max_preemption_failures, not max_failures.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from launcher.runtime.borrowed.jax import preemption_service_ready

POLL_S = 0.5


@dataclass
class Notice:
    """What this host was told: when (time.time()), the deadline (None: none given) and how."""

    at: float
    deadline: float | None
    source: str  # "ray drain" or "SIGTERM"
    # The host's capacity (launcher.runtime.cluster.node_capacity; None: not known) and whether it
    # is taken back with notices (Spot, flex-start): on other capacity a notice is no preemption.
    capacity: str | None = None
    preemptible: bool | None = None
    # The hosts being taken back (`<slice>/<worker id>`; empty: not known). Ray stops every rank
    # of their slices with them: a TPU slice is reclaimed whole (ray.train.v2's preemption
    # watcher counts a slice's every rank as preempted on a drain of any of its hosts).
    hosts: tuple[str, ...] = ()

    def seconds_left(self, now: float | None = None) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - (now or time.time()))

    def to_json(self) -> dict:
        found: dict[str, Any] = {"at": self.at, "deadline": self.deadline, "source": self.source}
        if self.capacity is not None:
            found |= {"capacity": self.capacity, "preemptible": self.preemptible}
        if self.hosts:
            found["hosts"] = list(self.hosts)
        return found

    def describe(self) -> str:
        left = self.seconds_left(self.at)
        hosts = f" for {', '.join(self.hosts)}" if self.hosts else ""
        return (
            f"preemption notice{hosts} ({self.source}, "
            + (f"{left:.0f} s to the deadline" if left is not None else "no deadline")
            + "): saving at the next step every host reaches"
        )


def _own_drain(node_id: str) -> tuple[bool, float | None]:
    """Whether Ray is draining this node: (True, its deadline as time.time() or None)."""
    from launcher.runtime.borrowed.ray import draining_nodes

    drained = draining_nodes()
    if node_id not in drained:
        return False, None
    return True, (drained[node_id] / 1000 if drained[node_id] else None)


def _host_names(node_ids: list[str]) -> tuple[str, ...]:
    """The TPU hosts of these Ray nodes, as the job's lines name them (from their labels)."""
    import ray

    from launcher.core.tpu.slices import host_name

    wanted = set(node_ids)
    try:
        nodes = ray.nodes()
    except Exception:  # a GCS hiccup: the notice goes on without the names
        return ()
    names = (host_name(n.get("Labels") or {}) for n in nodes if n.get("NodeID") in wanted)
    return tuple(sorted(n for n in names if n is not None))


def _to_jax(notice: Notice) -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # JAX's handler: the notice, not an exit


class NoticeRelay:
    """Watches for a preemption notice and hands it to the framework, once: Ray Train's signal
    (pushed to every worker of the group when one of its nodes is drained for preemption, after
    Ray Train's own poll) or this node's own drain, read twice a second (a short notice may not
    wait for Ray Train's poll). By default it goes to JAX as a SIGTERM, once JAX's preemption
    service runs; `deliver` hands it elsewhere (a PyTorch job's script: launcher.runtime.
    torch_job). `on_notice` records it where the driver reads it."""

    def __init__(
        self,
        train_context: object,
        node_id: str,
        on_notice,
        deliver: Callable[[Notice], None] = _to_jax,
        ready: Callable[[], bool] = preemption_service_ready,
    ) -> None:
        self._context = train_context
        self._node_id = node_id
        self._on_notice = on_notice
        self._deliver = deliver
        self._ready = ready
        self.notice: Notice | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="preemption-relay", daemon=True)

    def start(self) -> NoticeRelay:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def poll(self) -> Notice | None:
        info = self._context.preemption_context.preemption_info  # type: ignore[attr-defined]
        if info is not None:
            deadline = info.deadline_ms / 1000 if info.deadline_ms else None
            hosts = _host_names(info.preempted_node_ids)
            return Notice(time.time(), deadline, "ray drain", hosts=hosts)
        draining, deadline = _own_drain(self._node_id)
        if not draining:
            return None
        return Notice(time.time(), deadline, "ray drain", hosts=_host_names([self._node_id]))

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                notice = self.poll()
            except Exception:  # a GCS hiccup: the next poll asks again
                continue
            if notice is None or not self._ready():
                continue
            self.notice = notice
            self._deliver(notice)
            self._on_notice(notice)
            return


class StoppedWithoutDrain(RuntimeError):
    """MaxText stopped on a SIGTERM that reached the training process with no drain behind it."""


# How long a host stopped by JAX's preemption sync waits to learn of the drain behind it: JAX
# hands one host's notice to every host at once, Ray Train's own poll takes up to 5 s.
CONFIRM_S = 15.0


def after_preemption_stop(relay: NoticeRelay, saved_step: int | None) -> NoReturn:
    """MaxText stopped for a preemption: never return (Ray Train takes a clean return for the
    run's end). With Ray's drain behind it (seen here, or by another host: JAX passes one host's
    notice to all), wait for Ray Train to end this worker at the deadline: a preemption. With
    none, fail: a failure, as Ray was told of no preemption."""
    confirm_by = time.monotonic() + CONFIRM_S
    while relay.notice is None and relay.poll() is None:
        if time.monotonic() > confirm_by:
            raise StoppedWithoutDrain(
                f"MaxText stopped on a SIGTERM that Ray was not told of (step {saved_step} is "
                "saved; the restart resumes there and counts against --max_failures): a pod's "
                "termination reaches the job through the chart's preStop hook, which drains "
                "the node; a SIGTERM sent by hand to a training process does not"
            )
        time.sleep(POLL_S)
    while True:
        time.sleep(60)


def notice_from_pod(grace_seconds: int) -> int:
    """The worker pod's preStop hook (its termination: a reclaim, a maintenance event, a scale
    down): drains this pod's Ray node for preemption with the grace period as the deadline, then
    waits it out, so the pod's SIGTERM and kill come after the save."""
    import subprocess

    import ray

    from launcher.core.tpu.preemption import PRESTOP_MARGIN_S, drain_args

    seconds = max(1, grace_seconds - PRESTOP_MARGIN_S)
    ray.init(address="auto", logging_level=logging.ERROR)  # this pod's own raylet
    node_id = ray.get_runtime_context().get_node_id()
    ray.shutdown()
    message = "the pod is terminating (reclaim, maintenance or scale-down)"
    done = subprocess.run(drain_args(None, node_id, seconds, message), check=False)
    time.sleep(seconds)
    return done.returncode
