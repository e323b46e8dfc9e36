"""The local cluster's layout: which simulated hosts a slice name (or a CPU slice) becomes, and
the resources, labels and env each is started with, as KubeRay and the GKE TPU webhook give a
real TPU host. Pure: local/cluster.py starts the processes.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.client.workspace import LOCAL_BUCKET
from launcher.core.errors import UsageError
from launcher.core.tpu.slices import (
    LABEL_ACCELERATOR,
    LABEL_POD_TYPE,
    LABEL_SIMULATED,
    LABEL_SLICE,
    LABEL_TOPOLOGY,
    LABEL_WORKER_ID,
    TpuSlices,
    from_flags,
)
from launcher.core.tpu.table import GENERATIONS, slice_shape

DEFAULT_TPU = "v5p-16"  # 2 hosts x 4 chips, the smallest real multi-host slice
# Each simulated host is a Ray node whose training worker holds a JAX process with MaxText
# (about 1.5 GB): more than this many does not fit a workstation's memory.
MAX_SIMULATED_HOSTS = 8
HOST_ENV = "LAUNCHER_LOCAL_HOST"  # each simulated host's name, on every process it runs


def _smallest_multi_host(generation_name: str) -> str:
    topologies = GENERATIONS[generation_name].topologies
    return next(
        shape.name
        for shape in (slice_shape(generation_name, topo) for topo in topologies)
        if shape.multi_host
    )


def host_nodes(
    accelerator: str | None,
    topology: str | None,
    num_slices: int,
    cpu_hosts: int | None,
    cpu_devices: int | None,
    tpu: str | None = None,
) -> list[dict]:
    """The `ray start` resources, labels and env of each simulated host."""
    nodes = []
    if cpu_hosts:
        env = {
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": f"--xla_force_host_platform_device_count={cpu_devices}",
        }
        return [
            {"name": f"cpu-host-{i}", "resources": {}, "labels": {}, "env": env}
            for i in range(cpu_hosts)
        ]
    if not (tpu or accelerator or topology):
        tpu = DEFAULT_TPU
    slices = from_flags(accelerator, topology, num_slices, None, None, None, tpu=tpu)
    assert isinstance(slices, TpuSlices)
    shape = slices.shape
    if slices.num_workers > MAX_SIMULATED_HOSTS:
        raise UsageError(
            "tpu",
            f"{slices.describe()} has {slices.num_workers} hosts; the local cluster simulates at "
            f"most {MAX_SIMULATED_HOSTS} (each runs a JAX process with MaxText)",
            f"simulate the smallest multi-host slice of the same generation: "
            f"--tpu={_smallest_multi_host(shape.generation.name)}",
        )
    for s in range(num_slices):
        for host in range(shape.hosts):
            resources = {
                # Ray counts TPU per chip (ray#64058: per device only with
                # RAY_TPU_RESOURCE_PER_CHIP), as a tpu7x pod with google.com/tpu: 4 shows it.
                "TPU": shape.chips_per_host,
                f"accelerator_type:{shape.generation.ray_accelerator_type}": 1,
            }
            if host == 0:
                resources[f"TPU-{shape.pod_type}-head"] = 1
            nodes.append(
                {
                    "name": f"local-slice-{s}-host-{host}",
                    "resources": resources,
                    "labels": {
                        LABEL_SLICE: f"local-slice-{s}",
                        LABEL_WORKER_ID: str(host),
                        LABEL_TOPOLOGY: shape.topology,
                        LABEL_ACCELERATOR: shape.generation.ray_accelerator_type,
                        LABEL_POD_TYPE: shape.pod_type,
                        LABEL_SIMULATED: "true",
                    },
                    # What the GKE TPU webhook injects into a TPU pod; Ray reads the slice
                    # name here.
                    "env": {
                        "TPU_NAME": f"local-slice-{s}",
                        "TPU_WORKER_ID": str(host),
                        "JAX_PLATFORMS": "cpu",
                        # A host's JAX devices: its chips, or two per chip on tpu7x.
                        "XLA_FLAGS": (
                            f"--xla_force_host_platform_device_count={shape.devices_per_host}"
                        ),
                        # As the chart's multi-slice pods declare it (for the TPU webhook): a
                        # job on fewer slices must not believe it.
                        **({"MEGASCALE_NUM_SLICES": str(num_slices)} if num_slices > 1 else {}),
                    },
                }
            )
    return nodes


@dataclass(frozen=True)
class LocalClusterSpec:
    """What `tpu-launcher up` starts: one simulated slice shape (TPU) or a CPU-only slice."""

    tpu: str | None = None  # the simulated slice's name; default v5p-16
    accelerator: str | None = None
    topology: str | None = None
    num_slices: int = 1
    cpu_hosts: int | None = None
    cpu_devices_per_host: int = 2
    bucket_dir: str = LOCAL_BUCKET
    object_store_mb: int = 256
    dry_run: bool = False
