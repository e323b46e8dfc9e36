"""What the runtime borrows from a library's private surface, or patches, goes through
launcher.runtime.borrowed alone (one module per library), and every symbol is there in the
pinned library, Ray's with the parameters the launcher passes: an upgrade that moves one fails
here, on a workstation, not on a slice."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import pkgutil
import re

import pytest

from harness.paths import REPO
from launcher.runtime import borrowed as seam
from launcher.runtime.borrowed import Borrowed
from launcher.runtime.borrowed import ray as borrowed_ray
from launcher.runtime.borrowed.ray import borrowed

pytestmark = pytest.mark.unit

MODULES = {
    m.name: importlib.import_module(f"{seam.__name__}.{m.name}")
    for m in pkgutil.iter_modules(seam.__path__)
}
LIBRARIES = {
    name: [v for v in vars(module).values() if isinstance(v, Borrowed)]
    for name, module in MODULES.items()
}
SYMBOLS = [(lib, key) for (lib,) in LIBRARIES.values() for key in sorted(lib.symbols)]

# A private module of Ray's, or a private name imported from one of its modules.
RAY_PRIVATE = re.compile(
    r"\bray(\.\w+)*\.(_private|_internal|_raylet|core\.generated)\b"
    r"|\bfrom ray[\w.]* import [^\n]*\b_\w+|internal_kv\._"
)
# The same of the other libraries, and their private classes and functions by name.
OTHERS_PRIVATE = re.compile(
    r"\b(maxtext|orbax|jax|torch|grain)(\.\w+)*\._\w+"
    r"|\bfrom (maxtext|orbax|jax|torch|grain)[\w.]* import [^\n]*\b_\w+"
    r"|\b(grain_utility|em|multislice|c10d|distributed)\._\w+|_MultisliceCheckpointManager"
)
# A patch: a library's attribute set from outside it.
PATCH = re.compile(r"\b(rewrap|setattr)\(")


def test_every_module_of_the_seam_lends_one_library():
    assert set(MODULES) == {"ray", "maxtext", "orbax", "jax", "torch"}
    assert all(len(found) == 1 for found in LIBRARIES.values()), LIBRARIES


@pytest.mark.parametrize(
    "library", [lib for (lib,) in LIBRARIES.values()], ids=lambda lib: lib.distribution
)
def test_the_pinned_library_is_the_one_its_table_was_read_from(library):
    assert importlib.metadata.version(library.distribution) == library.version_read


@pytest.mark.parametrize(
    ("library", "key"), SYMBOLS, ids=[f"{lib.distribution}:{m}.{n}" for lib, (m, n) in SYMBOLS]
)
def test_every_borrowed_symbol_imports_through_the_seam(library, key):
    found = library.take(*key)
    assert found is not None or key[1] == "_torch_device_manager"
    if key in library.patched and key[1] != "_torch_device_manager":
        assert callable(found), f"{key} is patched as a function but is {found!r}"


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


def test_the_wrapped_functions_take_the_arguments_the_wraps_pass():
    """The wraps call the library's own with these names (memory_tier, example_record)."""
    from launcher.runtime.borrowed import maxtext, orbax

    def params(library: Borrowed, key: tuple[str, str]) -> list[str]:
        return list(inspect.signature(library.take(*key)).parameters)

    assert params(maxtext.MAXTEXT, maxtext.SAVE)[:6] == [
        "checkpoint_manager", "step", "state", "config", "data_iterator", "force",
    ]  # fmt: skip
    assert params(maxtext.MAXTEXT, maxtext.LOAD)[:2] == ["checkpoint_manager", "data_iterator"]
    assert "dataset_type" in params(maxtext.MAXTEXT, maxtext.LOAD)
    assert params(maxtext.MAXTEXT, maxtext.LOAD_BATCH) == ["self"]
    assert params(orbax.ORBAX, orbax.BROADCAST)[:4] == [
        "in_tree", "global_mesh", "replica_axis_index", "is_source",
    ]  # fmt: skip
    assert params(orbax.ORBAX, orbax.FROM_LOCAL)[:3] == ["self", "step", "restoring_slice_id"]
    assert params(orbax.ORBAX, orbax.FROM_PERSISTENT)[:2] == ["self", "step"]


def test_a_symbol_not_listed_is_refused():
    with pytest.raises(KeyError, match=r"not in launcher\.runtime\.borrowed\.ray's table"):
        borrowed("ray._private.state", "GlobalState")
    with pytest.raises(KeyError, match=r"not among launcher\.runtime\.borrowed\.ray's patched"):
        borrowed_ray.RAY.patch("ray._private.state", "state", lambda original: original)
    with pytest.raises(ValueError, match="patched but not borrowed"):
        Borrowed("x", "1", {}, frozenset({("m", "n")}))


def test_a_symbol_gone_from_the_library_names_the_table_to_read_again():
    gone = Borrowed("ray", "2.60.0", {("ray", "no_such_name"): "a test's"})
    with pytest.raises(ImportError, match=r"read from ray 2\.60\.0, is gone .*borrowed/ray\.py"):
        gone.take("ray", "no_such_name")


def test_the_failure_policy_swap_is_undone_after_the_block():
    from ray.train.v2.api import data_parallel_trainer

    original = data_parallel_trainer.create_failure_policy
    with borrowed_ray.failure_policy_factory(lambda config: "mine"):
        assert data_parallel_trainer.create_failure_policy(None) == "mine"
    assert data_parallel_trainer.create_failure_policy is original


def test_the_torchrun_contract_puts_both_names_back_after_the_script():
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    from launcher.runtime.torch.contract import torchrun_contract

    calls = ("init_process_group", "destroy_process_group")
    before = {(m, n): getattr(m, n) for m in (dist, c10d) for n in calls}
    with torchrun_contract("train.py"):
        assert all(getattr(m, n) is not f for (m, n), f in before.items())
    assert all(getattr(m, n) is f for (m, n), f in before.items())


def test_no_other_module_reaches_into_a_librarys_private_surface_or_patches_it():
    home = REPO / "launcher" / "runtime" / "borrowed"
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in sorted((REPO / "launcher").rglob("*.py"))
        if home not in path.parents
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if RAY_PRIVATE.search(code := line.split("#")[0])
        or OTHERS_PRIVATE.search(code)
        or ("runtime" in path.parts and PATCH.search(code))
    ]
    assert not found, "\n".join(found)


PATCHED = [(lib, key) for (lib,) in LIBRARIES.values() for key in sorted(lib.patched)]


@pytest.mark.parametrize(
    ("library", "key"), PATCHED, ids=[f"{lib.distribution}:{m}.{n}" for lib, (m, n) in PATCHED]
)
def test_every_patched_symbol_is_patched_where_the_library_looks_it_up(library, key):
    """What the memory tier, the example record and the contract patch: its owner found (a
    module, or the class of a dotted name), replaced while inside and put back after."""
    owner, attr = library.owner(*key)
    original = getattr(owner, attr)
    marker = object()
    with library.patching(*key, lambda found: marker if found is original else None):
        assert getattr(owner, attr) is marker
    assert getattr(owner, attr) is original
