"""JaxTrainer backend for slices whose devices are CPUs.

Ray's JaxConfig starts `jax.distributed` only with use_tpu or use_gpu; a multi-host CPU slice
(CPU-only clusters, H hosts x C devices) needs it just the same, so every worker joins one
JAX process group and MaxText sees H x C global devices.
"""

from __future__ import annotations

from dataclasses import dataclass

import ray
from ray.train.v2.jax.config import JaxConfig

from launcher.runtime.borrowed import ray as borrowed_ray


class _CpuJaxBackend(borrowed_ray.jax_backend()):  # type: ignore[misc]
    def on_start(self, worker_group, backend_config) -> None:
        addr, port = worker_group.execute_single(0, borrowed_ray.address_and_port())
        ray.get(
            [
                worker_group.execute_single_async(
                    i,
                    borrowed_ray.setup_jax_distributed(),
                    master_addr_with_port=f"{addr}:{port}",
                    num_workers=len(worker_group),
                    index=i,
                    use_tpu=False,
                    use_gpu=False,
                    resources_per_worker={},
                )
                for i in range(len(worker_group))
            ]
        )

    def on_shutdown(self, worker_group, backend_config) -> None:
        worker_group.execute(borrowed_ray.shutdown_jax_distributed())


@dataclass
class CpuJaxConfig(JaxConfig):
    @property
    def backend_cls(self):
        return _CpuJaxBackend
