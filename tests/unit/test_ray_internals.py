"""What the runtime borrows from Ray's private surface goes through launcher.runtime.ray_internals
alone, and every borrowed symbol is there in the pinned Ray with the parameters the launcher
passes: a Ray upgrade that moves one fails here, on a workstation."""

from __future__ import annotations

import inspect
import re

import pytest

from harness.paths import REPO
from launcher.runtime import ray_internals
from launcher.runtime.ray_internals import BORROWED, RAY_VERSION_READ, borrowed

pytestmark = pytest.mark.unit

# A private module of Ray's, or a private name imported from one of its modules.
PRIVATE = re.compile(
    r"\bray(\.\w+)*\.(_private|_internal|_raylet|core\.generated)\b"
    r"|\bfrom ray[\w.]* import [^\n]*\b_\w+|internal_kv\._"
)


def test_the_pinned_ray_is_the_one_the_seam_was_read_from():
    import ray

    assert ray.__version__ == RAY_VERSION_READ


@pytest.mark.parametrize("module,name", sorted(BORROWED), ids=lambda v: str(v))
def test_every_borrowed_symbol_imports_through_the_seam(module, name):
    assert borrowed(module, name) is not None or name == "_torch_device_manager"


def test_the_borrowed_calls_take_the_parameters_the_launcher_passes():
    kv = "ray.experimental.internal_kv"

    def params(module: str, name: str) -> set[str]:
        return set(inspect.signature(borrowed(module, name)).parameters)

    assert {"key", "value", "overwrite", "namespace"} <= params(kv, "_internal_kv_put")
    assert {"key", "namespace"} <= params(kv, "_internal_kv_get")
    assert {"prefix", "namespace"} <= params(kv, "_internal_kv_list")
    assert {
        "master_addr_with_port", "num_workers", "index", "use_tpu", "use_gpu",
        "resources_per_worker",
    } <= params("ray.train.v2.jax.config", "_setup_jax_distributed_environment")  # fmt: skip
    factory = "ray.train.v2.api.data_parallel_trainer", "create_failure_policy"
    assert len(inspect.signature(borrowed(*factory)).parameters) == 1
    assert callable(borrowed("ray._private.state", "state").get_draining_nodes)
    info = borrowed("ray.core.generated.gcs_pb2", "GcsNodeInfo")
    death = borrowed("ray.core.generated.common_pb2", "NodeDeathInfo")
    assert info.GcsNodeState.DEAD is not None and death.AUTOSCALER_DRAIN_PREEMPTED is not None
    assert callable(borrowed("ray._raylet", "InnerGcsClient").get_all_node_info)


def test_a_symbol_not_listed_is_refused():
    with pytest.raises(KeyError, match=r"not in ray_internals\.BORROWED"):
        borrowed("ray._private.state", "GlobalState")


def test_the_failure_policy_swap_is_undone_after_the_block():
    from ray.train.v2.api import data_parallel_trainer

    original = data_parallel_trainer.create_failure_policy
    with ray_internals.failure_policy_factory(lambda config: "mine"):
        assert data_parallel_trainer.create_failure_policy(None) == "mine"
    assert data_parallel_trainer.create_failure_policy is original


def test_no_other_module_reaches_into_rays_private_surface():
    seam = REPO / "launcher" / "runtime" / "ray_internals.py"
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in sorted((REPO / "launcher").rglob("*.py"))
        if path != seam
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line.split("#")[0])
    ]
    assert not found, "\n".join(found)
