"""The job's records in Ray's KV store on the head (GCS), under one namespace: what the hosts
hand the driver and Ray Train's controller (attempts, notices, heartbeats, hangs). A record
survives the host that wrote it."""

from __future__ import annotations

import json
from typing import Any

from launcher.runtime import ray_internals

KV_NAMESPACE = "tpu-launcher"


def put(key: str, value: Any) -> None:
    ray_internals.kv_put(key, json.dumps(value), KV_NAMESPACE)


def get(key: str) -> Any | None:
    raw = ray_internals.kv_get(key, KV_NAMESPACE)
    return json.loads(raw) if raw else None


def keys(prefix: str) -> list[str]:
    """The keys under `prefix`, sorted (Ray lists bytes)."""
    return sorted(ray_internals.kv_list(prefix, KV_NAMESPACE))


def records(prefix: str) -> dict[str, Any]:
    """Every record under `prefix`, by key."""
    return {k: v for k in keys(prefix) if (v := get(k)) is not None}
