"""TorchTrainer's backend for the launcher's slices: Ray's own (one process group over every
worker, `tpu_dist` where the workers hold TPU chips), except on hosts whose devices are CPUs
standing in for chips (the local cluster), where the group is gloo's and each worker's torch
device is the CPU. Ray would pick `tpu_dist` for any worker holding a TPU resource, and its
device manager would then ask for torch_tpu, which a simulated host has no chip for."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ray.train.backend import BackendConfig
from ray.train.torch.config import TorchConfig

from launcher.core.torch_plan import SIMULATED_NOTE
from launcher.runtime.ray_internals import torch_backend, use_cpu_torch_device
from launcher.runtime.torch_job import simulated

SIMULATED_BACKEND = "gloo"
_noted = False  # said once per job: the controller outlives the groups it restarts


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
        super().on_start(worker_group, backend_config)


@dataclass
class LauncherTorchConfig(TorchConfig):
    @property
    def backend_cls(self):
        return _LauncherTorchBackend
