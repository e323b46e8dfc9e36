"""The memory tier on a TPU host (launcher.core.job.checkpoint_tiers): what MaxText's emergency
checkpointing needs under Ray Train and does not do itself.

- `local_checkpoint_directory` is this host's memory volume (MEMORY_DIR_ENV): the chart mounts it
  in every TPU worker pod, the local cluster gives each simulated host its own directory.
- Orbax's emergency manager names processes by their jax.distributed ids
  (experimental_orbax_use_distributed_process_id); MaxText maps them only where it starts
  jax.distributed itself (maxtext/utils/max_utils.py, initialize_jax_for_tpu_with_emergency_
  checkpointing), and Ray Train's JaxTrainer has started it: the mapping is made here.
- MaxText builds the manager with Orbax's default replica axis, the mesh's first, which in
  MaxText 0.2.5's mesh_axes is `diloco` (size 1 but under DiLoCo): Orbax then sees one replica and
  drops the local directory (every save goes to the bucket). The manager here is MaxText's, with
  the replica axis the one that spans the slices (`data`: dcn_data_parallelism, MaxText's
  default) and at most MEMORY_COPIES copies in memory.
- Orbax hands a restored copy from the slice that holds it to the others by summing over the
  replica axis (orbax/checkpoint/_src/multihost/multislice.py, broadcast_one_replica_to_all);
  MaxText's state holds typed PRNG keys (a key<...> dtype), which cannot be summed ("Cannot
  interpret 'key<urbg>' as a data type"): they travel as their raw key data and are wrapped back.
- Which copy a restart restored (memory, and whose; or the bucket) is said, as Orbax decides it.
- The copies are per run (a directory per run_name in the volume); another run's are removed
  when a run starts there, since the volume holds the copies of one job at a time.
- MaxText's emergency checkpoints hold the model's state only, not Grain's iterator
  (checkpointing.load_state_if_possible returns none for the emergency managers), so a restart
  would read the data from its start. Each host writes its iterator's state at every save, as
  MaxText's own GrainCheckpointSave does (its text, grain_utility's), to the run's
  ITERATORS_SUBDIR on the bucket (a few hundred bytes: a host whose pod is gone has no memory
  to keep it in), and sets it back after the restore, at the step Orbax restored.
"""

from __future__ import annotations

import inspect
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from launcher.core.job.checkpoint_tiers import MEMORY_COPIES, MEMORY_DIR_ENV
from launcher.runtime.borrowed import maxtext as borrowed_maxtext
from launcher.runtime.borrowed import orbax as borrowed_orbax

# MaxText's mesh axis that spans the slices when dcn_data_parallelism does (its default).
SLICES_AXIS = "data"
# Beside the run's checkpoints: <run>/data_iterators/<step>/process_<i>-of-<n>.json.
ITERATORS_SUBDIR = "data_iterators"
# Iterator states kept besides the bucket period's: the latest in-memory saves' (Orbax keeps
# MEMORY_COPIES of those; a few more cover a restore that began before a newer save finished).
ITERATOR_STATES_KEPT = 4 * MEMORY_COPIES


class MemoryTierError(RuntimeError):
    """The memory tier cannot run on this host as configured: what, and the fix."""


def keys_of(argv: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in argv[1:] if "=" in a)


def uses_memory_tier(argv: list[str]) -> bool:
    return keys_of(argv).get("enable_emergency_checkpoint", "").lower() == "true"


def host_argv(argv: list[str], slices: int, cpu_devices: bool) -> list[str]:
    """MaxText's argv on this host for the memory tier: its memory volume, and on CPU devices
    standing in for slices (where MaxText folds every device into one slice) the slices as the
    mesh's data axis, as DCN's data parallelism makes them on TPU."""
    directory = os.environ.get(MEMORY_DIR_ENV)
    if not directory:
        raise MemoryTierError(
            f"checkpoint tier memory: this host has no memory volume ({MEMORY_DIR_ENV} is not "
            "set); fix: install the release with checkpoints.tier=memory (it mounts one in every "
            "TPU worker), or submit with --checkpoint_tier=bucket"
        )
    given = keys_of(argv)
    extra = {"local_checkpoint_directory": run_copies(Path(directory), given["run_name"])}
    if cpu_devices and slices > 1:
        extra["ici_data_parallelism"] = str(slices)
    return argv + [f"{k}={v}" for k, v in extra.items() if k not in given]


def run_copies(volume: Path, run_name: str) -> str:
    """This run's directory in the host's memory volume; other runs' copies are removed (a
    restart of this run keeps its own)."""
    for other in volume.iterdir() if volume.is_dir() else ():
        if other.name != run_name:
            shutil.rmtree(other, ignore_errors=True)
    return str(volume / run_name)


def install(on_restore: Callable[[int, str, float], None], run_dir: Path) -> None:
    """Before MaxText's train.main: Orbax's id maps, MaxText's manager with the slices' replica
    axis, Grain's iterator state saved and restored beside the copies (under `run_dir`), and
    the restore's step, source and seconds (Orbax's read and the copy's broadcast to the other
    slices) to `on_restore`."""
    import orbax.checkpoint as ocp
    from absl import flags
    from maxtext.common import emergency_checkpointing

    flags.FLAGS["experimental_orbax_use_distributed_process_id"].value = True
    ocp.multihost.initialize_runtime_to_distributed_ids()
    ocp.multihost.initialize_distributed_to_device_ids()
    emergency_checkpointing.create_emergency_checkpoint_manager = _manager_across_slices
    _broadcast_keys_as_data()
    restored: dict[str, int] = {}

    def note(step: int, source: str, seconds: float) -> None:
        restored["step"] = step
        on_restore(step, source, seconds)

    _report_restores(note)
    _keep_iterator_states(run_dir / ITERATORS_SUBDIR, restored)


def replica_axis(mesh) -> int:
    """The mesh axis whose replicas are whole processes (a slice's hosts each): refused if a
    process's devices fall in two replicas, where Orbax would misplace the copies."""
    import numpy as np

    if SLICES_AXIS not in mesh.axis_names:
        raise MemoryTierError(f"checkpoint tier memory: MaxText's mesh has no {SLICES_AXIS} axis")
    axis = list(mesh.axis_names).index(SLICES_AXIS)
    devices = np.moveaxis(mesh.devices, axis, 0)
    owner: dict[int, int] = {}
    for replica, part in enumerate(devices):
        for device in np.ravel(part):
            if owner.setdefault(device.process_index, replica) != replica:
                raise MemoryTierError(
                    f"checkpoint tier memory: host {device.process_index}'s chips are in two of "
                    f"the mesh's {devices.shape[0]} {SLICES_AXIS} replicas, so no slice holds a "
                    "whole copy; fix: leave ici_data_parallelism=1 and dcn_data_parallelism=-1 "
                    "(the slices are the data axis)"
                )
    if devices.shape[0] < 2:
        raise MemoryTierError(
            f"checkpoint tier memory: MaxText's mesh has one {SLICES_AXIS} replica, so Orbax "
            "would keep no copy in memory; fix: run on two slices or more with "
            "dcn_data_parallelism=-1"
        )
    return axis


def _manager_across_slices(
    local_checkpoint_dir,
    persistent_checkpoint_dir,
    global_mesh,
    abstract_state,
    local_save_interval_steps,
    persistent_save_interval_steps,
    orbax_logger=None,
):
    """MaxText 0.2.5's create_emergency_checkpoint_manager (maxtext/common/emergency_
    checkpointing.py), with the replica axis and the copies kept in memory set."""
    from etils import epath
    from flax import nnx
    from maxtext.common import emergency_checkpointing as mt
    from maxtext.common import train_state_nnx
    from maxtext.utils import gcs_utils

    os.makedirs(local_checkpoint_dir, exist_ok=True)
    persistent = gcs_utils.mkdir_and_check_permissions(persistent_checkpoint_dir)
    if isinstance(abstract_state, nnx.State):
        abstract_state = train_state_nnx.to_checkpoint_dict(abstract_state)
    options = mt.emergency_checkpoint_manager.CheckpointManagerOptions(
        local=mt.LocalCheckpointOptions(
            save_interval_steps=local_save_interval_steps, max_to_keep=MEMORY_COPIES
        ),
        persistent=mt.PersistentCheckpointOptions(
            save_interval_steps=persistent_save_interval_steps
        ),
        replica_axis_index=replica_axis(global_mesh),
    )
    return mt.CheckpointManager(
        epath.Path(local_checkpoint_dir),
        persistent,
        global_mesh=global_mesh,
        abstract_state=abstract_state,
        options=options,
        logger=orbax_logger,
    )


def _broadcast_keys_as_data() -> None:
    import jax

    def is_key(x) -> bool:
        return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)

    def keys_as_data(original):
        def broadcast(in_tree, global_mesh, replica_axis_index, is_source, **options):
            impls = [jax.random.key_impl(x) if is_key(x) else None for x in in_tree]
            raw = tuple(
                jax.random.key_data(x) if i else x for x, i in zip(in_tree, impls, strict=True)
            )
            out, count = original(raw, global_mesh, replica_axis_index, is_source, **options)
            wrapped = tuple(
                jax.random.wrap_key_data(x, impl=i) if i else x
                for x, i in zip(out, impls, strict=True)
            )
            return wrapped, count

        return broadcast

    borrowed_orbax.ORBAX.patch(*borrowed_orbax.BROADCAST, keys_as_data)


def _grain_iterator(data_iterator, dataset_type: str | None):
    """The host's Grain iterator behind MaxText's, or None (other data, nothing to keep)."""
    if dataset_type != "grain" or data_iterator is None or isinstance(data_iterator, list):
        return None
    return getattr(data_iterator, "local_iterator", None)


def _keep_iterator_states(directory: Path, restored: dict[str, int]) -> None:
    """Wraps MaxText's save_checkpoint and load_state_if_possible (module globals, which its
    train loop and set-up look up at each call)."""
    import jax

    maxtext = borrowed_maxtext.MAXTEXT
    state_to_text = maxtext.take(borrowed_maxtext.GRAIN, "_state_to_text")
    set_state_from_text = maxtext.take(borrowed_maxtext.GRAIN, "_set_state_from_text")

    def state_file(step: int) -> Path:
        name = f"process_{jax.process_index()}-of-{jax.process_count()}.json"
        return directory / str(step) / name

    def saving(save):
        def save_checkpoint(manager, step, state, config=None, data_iterator=None, force=False):
            saved = save(manager, step, state, config, data_iterator, force)
            iterator = _grain_iterator(data_iterator, getattr(config, "dataset_type", None))
            if saved and iterator is not None:
                path = state_file(int(step))
                path.parent.mkdir(parents=True, exist_ok=True)
                partial = path.with_suffix(".partial")
                partial.write_text(state_to_text(iterator))
                partial.replace(path)  # a killed host leaves no half-written state
                if jax.process_index() == 0:
                    _drop_old_states(directory, config.checkpoint_period)
            return saved

        return save_checkpoint

    def loading(load):
        def load_state_if_possible(manager, data_iterator, *args, **kwargs):
            loaded = load(manager, data_iterator, *args, **kwargs)
            given = inspect.signature(load).bind(manager, data_iterator, *args, **kwargs)
            iterator = _grain_iterator(
                data_iterator, given.arguments.get("dataset_type", "synthetic")
            )
            if "step" in restored and iterator is not None:
                path = state_file(restored["step"])
                if not path.is_file():
                    raise MemoryTierError(
                        f"checkpoint tier memory: step {restored['step']} was restored but "
                        f"this host's data iterator state for it is missing ({path}); the data "
                        "would start again from its beginning. Fix: resubmit with "
                        "--checkpoint_tier=bucket to resume from the bucket's checkpoint with "
                        "MaxText's own iterator state"
                    )
                set_state_from_text(iterator, path.read_text())
            return loaded

        return load_state_if_possible

    maxtext.patch(*borrowed_maxtext.SAVE, saving)
    maxtext.patch(*borrowed_maxtext.LOAD, loading)


def _drop_old_states(directory: Path, bucket_period: int) -> None:
    """The iterator states no restore can need any more: neither a bucket save's nor one of
    the latest in-memory saves'."""
    steps = sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
    recent = set(steps[-ITERATOR_STATES_KEPT:])
    for step in steps:
        if step % bucket_period and step not in recent:
            shutil.rmtree(directory / str(step), ignore_errors=True)


def _report_restores(on_restore: Callable[[int, str, float], None]) -> None:
    """Says which copy Orbax restores from: a slice's memory (the slice whose hosts hold the
    latest whole copy) or the bucket. Orbax 0.12's multi-slice manager decides in `restore`
    and calls one of these two."""

    def from_local(restore):
        def restore_from_local(self, step, restoring_slice_id):
            began = time.monotonic()
            restored = restore(self, step=step, restoring_slice_id=restoring_slice_id)
            source = f"memory (slice {restoring_slice_id}'s hosts)"
            on_restore(int(step), source, time.monotonic() - began)  # Orbax's steps: numpy ints
            return restored

        return restore_from_local

    def from_persistent(restore):
        def restore_from_persistent(self, step):
            began = time.monotonic()
            restored = restore(self, step=step)
            on_restore(int(step), "the bucket", time.monotonic() - began)
            return restored

        return restore_from_persistent

    borrowed_orbax.ORBAX.patch(*borrowed_orbax.FROM_LOCAL, from_local)
    borrowed_orbax.ORBAX.patch(*borrowed_orbax.FROM_PERSISTENT, from_persistent)
