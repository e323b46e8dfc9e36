"""TorchTrainer's backend for the launcher's slices: Ray's own (one process group over every
worker, `tpu_dist` where the workers hold TPU chips), except on hosts whose devices are CPUs
standing in for chips (the local cluster), where the group is gloo's and each worker's torch
device is the CPU. Ray would pick `tpu_dist` for any worker holding a TPU resource, and its
device manager would then ask for torch_tpu, which a simulated host has no chip for. On TPU,
TorchTPU's slice variables are set on every worker first (launcher.runtime.torch.tpu_env)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import ray
from ray.train.backend import BackendConfig
from ray.train.torch.config import TorchConfig

from launcher.core.job.torch_plan import SIMULATED_NOTE
from launcher.runtime.borrowed.ray import torch_backend, use_cpu_torch_device
from launcher.runtime.torch.job import simulated
from launcher.runtime.torch.tpu_env import (
    ChipWorker,
    describe,
    free_ports,
    one_host_slices,
    set_unless_set,
    slice_env,
    this_worker,
)

SIMULATED_BACKEND = "gloo"
_noted = False  # said once per job: the controller outlives the groups it restarts
_described = ""  # the TorchTPU slice last said, likewise


class _LauncherTorchBackend(torch_backend()):  # type: ignore[misc]
    def on_start(self, worker_group, backend_config: BackendConfig) -> None:
        assert isinstance(backend_config, TorchConfig)
        if worker_group.execute_single(0, simulated):
            worker_group.execute(use_cpu_torch_device)
            backend_config = dataclasses.replace(backend_config, backend=SIMULATED_BACKEND)
            global _noted
            if not _noted:
                print(SIMULATED_NOTE, flush=True)
                _noted = True
        elif isinstance(backend_config, LauncherTorchConfig) and backend_config.topology:
            _set_torch_tpu_env(worker_group, backend_config.topology)
        super().on_start(worker_group, backend_config)


def _chip_worker() -> ChipWorker:
    return this_worker(ray.util.get_node_ip_address())


def _set_torch_tpu_env(worker_group, topology: str) -> None:
    """TorchTPU's variables on every worker, before tpu_dist's group is made (it reads them
    then); a one-host slice's ports are picked on its host."""
    workers = worker_group.execute(_chip_worker)  # in rank order
    ports = {
        name: worker_group.execute_single(ranks[0], free_ports, len(ranks))
        for name, ranks in one_host_slices(workers).items()
    }
    envs = slice_env(workers, topology, ports)
    for rank, env in enumerate(envs):
        worker_group.execute_single(rank, set_unless_set, env)
    global _described
    said = describe(envs[0])
    if said != _described:
        _described = said
        print(said, flush=True)


@dataclass
class LauncherTorchConfig(TorchConfig):
    topology: str | None = None  # the slices' ("4x4"): TorchTPU's mesh, on TPU

    @property
    def backend_cls(self):
        return _LauncherTorchBackend
