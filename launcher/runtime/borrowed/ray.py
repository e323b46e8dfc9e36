"""What the runtime borrows from Ray's private surface, all of it: read from Ray 2.60.0
(pyproject.toml's jobs extra pins it). tests/unit/test_borrowed.py also checks the parameters
the launcher passes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from launcher.runtime.borrowed import Borrowed

# (module, name): every private symbol the runtime uses, and why.
BORROWED: dict[tuple[str, str], str] = {
    # Ray's KV store on the head (GCS): the job's records (launcher.runtime.job.kv).
    ("ray.experimental.internal_kv", "_internal_kv_put"): "job records into the KV store",
    ("ray.experimental.internal_kv", "_internal_kv_get"): "job records from the KV store",
    ("ray.experimental.internal_kv", "_internal_kv_list"): "the job's record keys",
    # Preemption: the nodes Ray drains (ray.nodes() says nothing of a drain), and those that died
    # of it with their time (the GCS node table; ray.nodes() gives no time).
    ("ray._private.state", "state"): "get_draining_nodes(): a host's own drain, read twice a s",
    ("ray._private.worker", "global_worker"): "its gcs_client: the dead nodes with their end",
    ("ray._raylet", "InnerGcsClient"): "what gcs_client answers get_all_node_info with",
    ("ray.core.generated.common_pb2", "NodeDeathInfo"): "AUTOSCALER_DRAIN_PREEMPTED",
    ("ray.core.generated.gcs_pb2", "GcsNodeInfo"): "the DEAD state filter",
    # Ray Train's worker context, which its preemption watcher writes to.
    ("ray.train.v2._internal.execution.context", "get_train_context"): "the worker's context",
    # The failure policy with a hang budget (launcher.runtime.job.hang_policy).
    ("ray.train.v2._internal.execution.failure_handling", "DefaultFailurePolicy"): "its base",
    ("ray.train.v2._internal.execution.failure_handling", "FailureDecision"): "RETRY, RAISE",
    ("ray.train.v2._internal.execution.failure_handling", "FailurePolicy"): "the factory's type",
    (
        "ray.train.v2._internal.execution.failure_handling.default",
        "_is_preemption_failure",
    ): "preemptions stay Ray's to count",
    ("ray.train.v2.api.data_parallel_trainer", "create_failure_policy"): "swapped during fit",
    # The JAX process group on CPU hosts (launcher.runtime.train.cpu_backend).
    ("ray.train._internal.utils", "get_address_and_port"): "rank 0's address for jax",
    ("ray.train.v2.jax.config", "_JaxBackend"): "the CPU slice's backend's base",
    ("ray.train.v2.jax.config", "_setup_jax_distributed_environment"): "jax.distributed on CPU",
    ("ray.train.v2.jax.config", "_shutdown_jax_distributed"): "its end",
    # PyTorch on simulated chips (launcher.runtime.torch.backend).
    ("ray.train.torch.config", "_TorchBackend"): "the torch backend's base",
    ("ray.air._internal.device_manager", "_torch_device_manager_lock"): "the device swap's lock",
    ("ray.air._internal.device_manager", "_torch_device_manager"): "the worker's device manager",
    ("ray.air._internal.device_manager.cpu", "CPUTorchDeviceManager"): "the CPU as the device",
    # Ray Train's per-rank INFO lines ("Reporting training result N ... from rank R"): kept in
    # its session log files, left out of the console a job's log is made of.
    ("ray.train.v2._internal.logging.logging", "SessionFileHandler"): "its log files' handler",
    # The label every node carries with its id: a label selector of the CPU hosts' ids keeps
    # data prepare's Ray Data tasks off the TPU slices (launcher.runtime.data.prepare).
    ("ray._raylet", "RAY_NODE_ID_KEY"): "the node-id label's key",
}


_FACTORY = "ray.train.v2.api.data_parallel_trainer", "create_failure_policy"
_DEVICE_MANAGER = "ray.air._internal.device_manager", "_torch_device_manager"
RAY = Borrowed("ray", "2.60.0", BORROWED, frozenset({_FACTORY, _DEVICE_MANAGER}))
borrowed = RAY.take


# The job's KV store (GCS), under one namespace.
def kv_put(key: str, value: str, namespace: str) -> None:
    borrowed("ray.experimental.internal_kv", "_internal_kv_put")(
        key, value, overwrite=True, namespace=namespace
    )


def kv_get(key: str, namespace: str) -> bytes | None:
    found: bytes | None = borrowed("ray.experimental.internal_kv", "_internal_kv_get")(
        key, namespace=namespace
    )
    return found


def kv_list(prefix: str, namespace: str) -> list[str]:
    found = borrowed("ray.experimental.internal_kv", "_internal_kv_list")(
        prefix, namespace=namespace
    )
    return [k.decode() if isinstance(k, bytes) else k for k in found]


def nodes_selector(node_ids: list[str]) -> dict[str, str]:
    """A task's label_selector that places it on one of these nodes."""
    return {borrowed("ray._raylet", "RAY_NODE_ID_KEY"): f"in({','.join(node_ids)})"}


def draining_nodes() -> dict[str, int]:
    """Node id -> its drain deadline (ms since the epoch; 0: none) for every node Ray drains."""
    return borrowed("ray._private.state", "state").get_draining_nodes() or {}


def preempted_dead_nodes() -> dict[str, float]:
    """Nodes that died drained for preemption, each with when it went (seconds since the
    epoch)."""
    node_death = borrowed("ray.core.generated.common_pb2", "NodeDeathInfo")
    node_info = borrowed("ray.core.generated.gcs_pb2", "GcsNodeInfo")
    gcs = borrowed("ray._private.worker", "global_worker").gcs_client
    dead = gcs.get_all_node_info(timeout=30, state_filter=node_info.GcsNodeState.DEAD)
    return {
        node_id.hex(): info.end_time_ms / 1000
        for node_id, info in dead.items()
        if info.death_info.reason == node_death.AUTOSCALER_DRAIN_PREEMPTED
    }


# Ray Train's classes the launcher's own derive from, and the functions it runs on workers.
_HANDLING = "ray.train.v2._internal.execution.failure_handling"
_JAX_CONFIG = "ray.train.v2.jax.config"


def default_failure_policy() -> type:
    """Ray Train's default failure policy (max_failures, preemptions apart)."""
    base: type = borrowed(_HANDLING, "DefaultFailurePolicy")
    return base


def failure_decision() -> Any:
    """Ray Train's FailureDecision enum (RETRY, RAISE)."""
    return borrowed(_HANDLING, "FailureDecision")


def is_preemption_failure(error: BaseException) -> bool:
    return bool(borrowed(f"{_HANDLING}.default", "_is_preemption_failure")(error))


def charge_as_failure(policy: Any) -> tuple[int, float]:
    """Charges a restart Ray would take for a preemption to the worker-group failures of its
    default policy instead (Ray 2.60 counts them in `_worker_group_failures`, against
    FailureConfig.max_failures): the new count and its limit."""
    policy._worker_group_failures += 1
    limit = policy.failure_config.max_failures
    return policy._worker_group_failures, float("inf") if limit == -1 else limit


def failure_policy_logger() -> str:
    """The logger Ray's default policy says its decisions on (which `submit` shows)."""
    return f"{_HANDLING}.default"


def jax_backend() -> type:
    """Ray Train's JAX backend, whose start a CPU slice's replaces."""
    base: type = borrowed(_JAX_CONFIG, "_JaxBackend")
    return base


def setup_jax_distributed() -> Callable[..., None]:
    """Ray Train's jax.distributed start on a worker."""
    fn: Callable[..., None] = borrowed(_JAX_CONFIG, "_setup_jax_distributed_environment")
    return fn


def shutdown_jax_distributed() -> Callable[[], None]:
    fn: Callable[[], None] = borrowed(_JAX_CONFIG, "_shutdown_jax_distributed")
    return fn


def address_and_port() -> Callable[[], tuple[str, int]]:
    """Ray Train's (address, free port) of a worker, run on rank 0."""
    fn: Callable[[], tuple[str, int]] = borrowed(
        "ray.train._internal.utils", "get_address_and_port"
    )
    return fn


def torch_backend() -> type:
    """Ray Train's torch backend, which the launcher's wraps."""
    base: type = borrowed("ray.train.torch.config", "_TorchBackend")
    return base


def train_context() -> object:
    """Ray Train's context of this worker."""
    return borrowed("ray.train.v2._internal.execution.context", "get_train_context")()


@contextlib.contextmanager
def failure_policy_factory(make: Callable[[Any], Any]) -> Iterator[None]:
    """While inside, Ray Train's trainers build their failure policy with `make(FailureConfig)`
    (Ray 2.60 builds it from the FailureConfig alone, in one module-level factory)."""
    with RAY.patching(*_FACTORY, lambda _: make):
        yield


def use_cpu_torch_device() -> None:
    """This worker's torch device is the CPU, whatever accelerator it holds (Ray's device
    manager is chosen once per process, from its accelerator ids, and then kept)."""
    module = _DEVICE_MANAGER[0]
    cpu = borrowed(f"{module}.cpu", "CPUTorchDeviceManager")
    with borrowed(module, "_torch_device_manager_lock"):
        setattr(*RAY.owner(*_DEVICE_MANAGER), cpu())  # chosen once, not wrapped


REPORT_LINE = "Reporting training result"  # Ray Train's worker context, one per rank and report


def quiet_report_lines() -> None:
    """Ray Train's per-rank report lines out of the worker's console (its session log files,
    Ray's full record, keep them): on a PyTorch job they were one per rank per save in the
    job's log."""
    import logging

    files = borrowed("ray.train.v2._internal.logging.logging", "SessionFileHandler")

    def not_a_report(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(REPORT_LINE)

    for handler in logging.getLogger("ray.train").handlers:
        if not isinstance(handler, files) and not_a_report not in handler.filters:
            handler.addFilter(not_a_report)
