"""The job's records in Ray's KV store on the head (GCS), under one namespace: what the hosts
hand the driver and Ray Train's controller (attempts, notices, heartbeats, hangs). A record
survives the host that wrote it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from launcher.core.job.goodput import Attempt
from launcher.runtime.borrowed import ray as borrowed_ray

KV_NAMESPACE = "tpu-launcher"


def put(key: str, value: Any) -> None:
    borrowed_ray.kv_put(key, json.dumps(value), KV_NAMESPACE)


def get(key: str) -> Any | None:
    raw = borrowed_ray.kv_get(key, KV_NAMESPACE)
    return json.loads(raw) if raw else None


def keys(prefix: str) -> list[str]:
    """The keys under `prefix`, sorted (Ray lists bytes)."""
    return sorted(borrowed_ray.kv_list(prefix, KV_NAMESPACE))


def records(prefix: str) -> dict[str, Any]:
    """Every record under `prefix`, by key."""
    return {k: v for k in keys(prefix) if (v := get(k)) is not None}


@dataclass(frozen=True)
class JobKeys:
    """Every key of one job's records, under its summary key (launcher.runtime.job.driver): the one
    place the layout is written.

        <summary>                          rank 0's summary of the run
        <summary>/attempts/<begun>         each start's events (host.started)
        <summary>/last_step/<begun>        the last step each start reached
        <summary>/notices/<ns>-<rank>      preemption notices the hosts saw
        <summary>/heartbeats/<rank>        each host's last step, for the hang watchdog
        <summary>/hangs/<ns>-<rank>        hangs a watchdog recorded (Ray Train's policy reads)
        <summary>/hang-reported            the first host to report a hang (the others wait)
    """

    summary: str

    def _under(self, kind: str, name: str = "") -> str:
        return f"{self.summary}/{kind}/{name}"

    def attempt(self, begun: int | str = "") -> str:
        return self._under("attempts", str(begun))

    def last_step(self, begun: int | str) -> str:
        return self._under("last_step", str(begun))

    def notice(self, at_ns: int | None = None, rank: int = 0) -> str:
        return self._under("notices", "" if at_ns is None else f"{at_ns}-{rank}")

    def heartbeat(self, rank: int | None = None) -> str:
        return self._under("heartbeats", "" if rank is None else str(rank))

    def hang(self, at_ns: int | None = None, rank: int = 0) -> str:
        return self._under("hangs", "" if at_ns is None else f"{at_ns}-{rank}")

    @property
    def hang_reported(self) -> str:
        return f"{self.summary}/hang-reported"


# What the hosts recorded, as the driver and the summary read it.
def read_notices(key: str) -> list[dict]:
    """Every preemption notice a host of the job saw, oldest first."""
    return sorted(records(JobKeys(key).notice()).values(), key=lambda n: n["at"])


def read_hangs(key: str) -> list[dict]:
    """Every hang a host's watchdog recorded, oldest first
    (launcher.runtime.train.hang_watchdog)."""
    return sorted(records(JobKeys(key).hang()).values(), key=lambda h: h["at"])


def publish_summary(key: str, summary: dict) -> None:
    """Hands rank 0's numbers to the driver (Ray Train keeps metrics only with checkpoints)."""
    put(key, summary)


def read_summary(key: str) -> dict:
    return get(key) or {}


def read_attempts(key: str) -> list[Attempt]:
    """Every start's events (the first and each restart), in Ray's KV store on the head: a
    killed host's events survive it, up to its last publish, and its last step."""
    found = []
    keys = JobKeys(key)
    for name, record in records(keys.attempt()).items():
        attempt = Attempt.from_json(record)
        started = name.rsplit("/", 1)[-1]  # the attempt's key
        if last := get(keys.last_step(started)):
            attempt.last_step = last["step"]
        found.append(attempt)
    return found
