"""The job's records in Ray's KV store on the head (GCS), under one namespace: what the hosts
hand the driver and Ray Train's controller (attempts, notices, heartbeats, hangs). A record
survives the host that wrote it."""

from __future__ import annotations

import json
from typing import Any

from ray.experimental import internal_kv

KV_NAMESPACE = "tpu-launcher"


def put(key: str, value: Any) -> None:
    internal_kv._internal_kv_put(key, json.dumps(value), overwrite=True, namespace=KV_NAMESPACE)


def get(key: str) -> Any | None:
    raw = internal_kv._internal_kv_get(key, namespace=KV_NAMESPACE)
    return json.loads(raw) if raw else None


def keys(prefix: str) -> list[str]:
    """The keys under `prefix`, sorted (Ray lists bytes)."""
    found = internal_kv._internal_kv_list(prefix, namespace=KV_NAMESPACE)
    return sorted(k.decode() if isinstance(k, bytes) else k for k in found)


def records(prefix: str) -> dict[str, Any]:
    """Every record under `prefix`, by key."""
    return {k: v for k in keys(prefix) if (v := get(k)) is not None}
