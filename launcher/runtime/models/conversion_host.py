"""Where a conversion runs: on a host of the job's Ray cluster with the memory it needs,
checked before it starts. A job's driver runs on the head, whose memory is sized for Ray's
control plane (the chart's head: 16Gi); converting a model holds its weights twice (read, and
converted), about 32 GB for an 8B model in bfloat16 and 280 GB for a 70B, which a TPU host has
(a v6e host: 720 GiB; the chart gives a worker pod 200G of it) and the head does not. Ray
places the conversion as a task that reserves that memory (its `memory` resource), so it lands
on a host that has it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launcher.core.errors import UsageError

HEADROOM = 2 << 30  # Python, JAX on CPU and the checkpoint writer's buffers beside the arrays


def conversion_bytes(weight_bytes: int) -> int:
    return 2 * weight_bytes + HEADROOM


def _gib(n: float) -> str:
    return f"{n / (1 << 30):,.1f} GiB"


def run_where_memory_is(
    fn: Callable[..., Any], args: tuple, need: int, what: str, field: str
) -> Any:
    """fn(*args) as a Ray task on a host whose Ray memory covers `need` bytes; its result.
    Raises UsageError, before anything starts, when no host of the cluster has it."""
    import ray

    ray.init(address="auto", log_to_driver=True)  # the job's own cluster
    have = largest_memory(ray.nodes(), need, what, field)
    print(
        f"launcher: {what} as a task that reserves {_gib(need)} of host memory; "
        f"the largest host offers {_gib(have)}",
        flush=True,
    )
    task = ray.remote(num_cpus=1, memory=need, max_retries=0)(_on_host)
    # JAX on CPU only: a TPU host's chips belong to training jobs, not to this.
    task = task.options(runtime_env={"env_vars": {"JAX_PLATFORMS": "cpu"}})
    return ray.get(task.remote(fn, args))


def largest_memory(nodes: list[dict[str, Any]], need: int, what: str, field: str) -> int:
    """The most memory a live host of `nodes` (ray.nodes()) offers a task; UsageError when it
    is less than `need` bytes."""
    alive = [n for n in nodes if n.get("Alive")]
    largest = max(alive, key=lambda n: n["Resources"].get("memory", 0))
    have = int(largest["Resources"].get("memory", 0))
    if have < need:
        raise UsageError(
            field,
            f"{what} needs about {_gib(need)} of host memory (its weights twice, read and "
            f"converted, and {_gib(HEADROOM)} beside them); the largest host of this cluster "
            f"offers {_gib(have)} ({largest.get('NodeManagerAddress', '?')})",
            "give the TPU workers more of their host's memory (the chart's default is 200G of "
            "a v6e host's 720 GiB; Ray offers about 70% of a pod's): --set "
            "ray.worker.resources.requests.memory=600G --set "
            "ray.worker.resources.limits.memory=600G",
        )
    return have


def _on_host(fn: Callable[..., Any], args: tuple) -> Any:
    import ray

    print(f"launcher: running on {ray.util.get_node_ip_address()}", flush=True)
    return fn(*args)
