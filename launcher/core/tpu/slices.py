"""What a job runs on: N TPU slices of one shape (TpuSlices), or H CPU hosts x C devices
(CpuSlices); and the Ray Train ScalingConfig that places one JaxTrainer worker per host.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from launcher.core.errors import UsageError
from launcher.core.tpu.table import (
    GKE_ACCELERATOR_LABEL,
    GKE_TOPOLOGY_LABEL,
    SliceShape,
    generation,
    slice_shape,
    tpu_type,
)

# Labels Ray puts on TPU nodes (KubeRay + the GKE webhook on GKE, our local cluster here).
LABEL_SLICE = "ray.io/tpu-slice-name"
LABEL_WORKER_ID = "ray.io/tpu-worker-id"
LABEL_TOPOLOGY = "ray.io/tpu-topology"
LABEL_ACCELERATOR = "ray.io/accelerator-type"
LABEL_POD_TYPE = "ray.io/tpu-pod-type"
# On the local cluster's simulated TPU hosts only (CPUs stand in for the chips): a PyTorch job's
# driver reads which process group the slice gives (gloo here, tpu_dist on TPU) before any
# worker starts.
LABEL_SIMULATED = "tpu-launcher/simulated-chips"


def host_name(labels: Mapping[str, str]) -> str | None:
    """A TPU host as the job's lines name it, `<slice>/<worker id>`, from its Ray node's labels
    (None: not a TPU host)."""
    if LABEL_SLICE not in labels:
        return None
    return f"{labels[LABEL_SLICE]}/{labels.get(LABEL_WORKER_ID, '?')}"


if TYPE_CHECKING:  # Ray is imported where a config is built: in the cluster
    from ray.train.v2.api.config import ScalingConfig


class _Counts:
    """What follows from hosts per slice and devices per host, for either kind of slice."""

    num_slices: int

    @property
    def hosts_per_slice(self) -> int:
        raise NotImplementedError

    @property
    def devices_per_host(self) -> int:
        raise NotImplementedError

    @property
    def num_workers(self) -> int:
        return self.hosts_per_slice * self.num_slices

    @property
    def devices_per_slice(self) -> int:
        return self.hosts_per_slice * self.devices_per_host

    @property
    def num_devices(self) -> int:
        return self.devices_per_slice * self.num_slices


@dataclass(frozen=True)
class TpuSlices(_Counts):
    """`num_slices` TPU slices of one shape."""

    shape: SliceShape
    num_slices: int = 1

    @property
    def hosts_per_slice(self) -> int:
        return self.shape.hosts

    @property
    def devices_per_host(self) -> int:
        return self.shape.devices_per_host

    @property
    def name(self) -> str:
        """The slice as Cloud TPU names it (its metrics' `slice` label)."""
        return self.shape.name

    def describe(self) -> str:
        s = self.shape
        many = f"{self.num_slices} x " if self.num_slices > 1 else ""
        return (
            f"{many}{s.name} (TPU {s.generation.name} {s.topology}: {s.hosts} hosts x "
            f"{s.chips_per_host} chips)"
        )

    def scaling_config(
        self, min_slices: int | None = None, resize_check_s: float = 60.0
    ) -> ScalingConfig:
        """One Ray Train worker per host; Ray's slice reservation gang-schedules them. With
        min_slices below num_slices, Ray's elastic trainer takes whole slices in between and
        checks every resize_check_s whether more came back."""
        from ray.train.v2.api.config import ScalingConfig  # JaxTrainer's (Ray Train v2)

        elastic = min_slices is not None and min_slices < self.num_slices
        return ScalingConfig(
            use_tpu=True,
            num_workers=(
                (min_slices * self.hosts_per_slice, self.num_workers)
                if elastic and min_slices is not None
                else self.num_workers
            ),
            elastic_resize_monitor_interval_s=resize_check_s,
            topology=self.shape.topology,
            accelerator_type=self.shape.generation.ray_accelerator_type,
            resources_per_worker={"TPU": self.shape.chips_per_host},
            placement_strategy="SPREAD",
        )


@dataclass(frozen=True)
class CpuSlices(_Counts):
    """One CPU-only slice: `hosts` Ray workers of `cpus_per_host` JAX CPU devices each."""

    hosts: int
    cpus_per_host: int
    num_slices: int = 1

    @property
    def hosts_per_slice(self) -> int:
        return self.hosts

    @property
    def devices_per_host(self) -> int:
        return self.cpus_per_host

    @property
    def name(self) -> str:
        """The CPU-only slice's name in the metrics' `slice` label: cpu-<hosts>x<devices>."""
        return f"cpu-{self.hosts}x{self.cpus_per_host}"

    def describe(self) -> str:
        return f"CPU slice: {self.hosts} hosts x {self.cpus_per_host} devices"

    def scaling_config(
        self, min_slices: int | None = None, resize_check_s: float = 60.0
    ) -> ScalingConfig:
        from ray.train.v2.api.config import ScalingConfig  # JaxTrainer's (Ray Train v2)

        return ScalingConfig(
            num_workers=self.num_workers,
            resources_per_worker={"CPU": 1},
            placement_strategy="SPREAD",
        )


# What a job runs on: TPU slices, or a CPU slice (the local cluster, CPU-only releases).
Slices = TpuSlices | CpuSlices


def from_flags(
    accelerator_type: str | None,
    topology: str | None,
    num_slices: int,
    chips_per_host: int | None,
    cpu_hosts: int | None,
    cpu_devices_per_host: int | None,
    tpu: str | None = None,
) -> Slices | None:
    """The slice the flags name, or None when they name none (then the cluster decides).
    `tpu` is the slice's name (v6e-16); --accelerator_type/--topology are its long form."""
    if num_slices < 1:
        raise UsageError("num_slices", f"must be at least 1, got {num_slices}", "--num_slices=1")
    if cpu_hosts or cpu_devices_per_host:
        if accelerator_type or topology or tpu:
            raise UsageError(
                "cpu_hosts",
                "a CPU slice and a TPU slice were both given",
                "pass either --cpu_hosts/--cpu_devices_per_host or --accelerator_type/--topology",
            )
        if not cpu_hosts or not cpu_devices_per_host or cpu_hosts < 1 or cpu_devices_per_host < 1:
            raise UsageError(
                "cpu_hosts",
                f"a CPU slice needs both counts >= 1 (got hosts={cpu_hosts}, "
                f"devices per host={cpu_devices_per_host})",
                "pass --cpu_hosts=2 --cpu_devices_per_host=2",
            )
        return CpuSlices(cpu_hosts, cpu_devices_per_host)
    if tpu:
        shape = tpu_type(tpu, chips_per_host)
        if (accelerator_type and generation(accelerator_type) != shape.generation) or (
            topology and topology.strip().lower() != shape.topology
        ):
            raise UsageError(
                "tpu",
                f"{tpu} is TPU {shape.generation.name} {shape.topology}, but "
                f"--accelerator_type={accelerator_type} --topology={topology} say otherwise",
                f"pass --tpu={tpu} alone (or only the long form)",
            )
        return TpuSlices(shape, num_slices)
    if accelerator_type or topology:
        if not (accelerator_type and topology):
            missing = "topology" if accelerator_type else "accelerator_type"
            raise UsageError(
                missing,
                "is required with the other TPU flag",
                f"pass --{missing}=..., e.g. --accelerator_type=v6e --topology=4x4",
            )
        return TpuSlices(slice_shape(accelerator_type, topology, chips_per_host), num_slices)
    return None


def from_cluster_nodes(nodes: list[dict[str, Any]]) -> TpuSlices:
    """Reads the TPU slices a Ray cluster offers (alive nodes with TPU resources and labels)."""
    tpu_nodes = [n for n in nodes if n.get("Alive") and n.get("Resources", {}).get("TPU")]
    if not tpu_nodes:
        raise UsageError(
            "accelerator_type",
            "the Ray cluster has no TPU nodes, and no slice was given",
            "pass --accelerator_type and --topology (TPU) or --cpu_hosts and "
            "--cpu_devices_per_host (CPU-only clusters)",
        )
    by_slice: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in tpu_nodes:
        by_slice[node.get("Labels", {}).get(LABEL_SLICE, node.get("NodeID", "?"))].append(node)
    shapes: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for name, members in sorted(by_slice.items()):
        labels = members[0].get("Labels", {})
        accel, topo = labels.get(LABEL_ACCELERATOR), labels.get(LABEL_TOPOLOGY)
        if not accel or not topo:
            raise UsageError(
                "accelerator_type",
                f"TPU node(s) of slice {name} carry no {LABEL_ACCELERATOR}/{LABEL_TOPOLOGY} labels",
                "pass --accelerator_type and --topology explicitly",
            )
        chips = int(members[0]["Resources"]["TPU"])
        shape = slice_shape(accel, topo, chips)
        if len(members) != shape.hosts:
            raise UsageError(
                "topology",
                f"slice {name} ({shape.name}) has {len(members)} of its {shape.hosts} hosts "
                "in the Ray cluster",
                "wait until every TPU worker pod is Running (kubectl get pods), then resubmit",
            )
        shapes[(shape.generation.name, shape.topology, shape.chips_per_host)].append(name)
    if len(shapes) > 1:
        found = "; ".join(f"{k[0]} {k[1]}: {len(v)} slice(s)" for k, v in shapes.items())
        raise UsageError(
            "topology",
            f"the cluster has slices of several shapes ({found})",
            "pass --accelerator_type, --topology and --num_slices to choose",
        )
    (gen, topo, chips), names = next(iter(shapes.items()))
    return TpuSlices(slice_shape(gen, topo, chips), len(names))


def from_pod_spec(pod: dict[str, Any], replicas: int) -> TpuSlices | None:
    """The slices a Kubernetes pod template asks for (a RayCluster worker group, a JobSet's
    replicated Job): its GKE TPU node selectors, its google.com/tpu limit (chips per host) and
    `replicas` (one per slice); None for a pod without TPUs."""
    chips = sum(
        int(c.get("resources", {}).get("limits", {}).get("google.com/tpu", 0))
        for c in pod.get("containers", [])
    )
    selectors = pod.get("nodeSelector") or {}
    if not chips or GKE_TOPOLOGY_LABEL not in selectors:
        return None
    shape = slice_shape(selectors[GKE_ACCELERATOR_LABEL], selectors[GKE_TOPOLOGY_LABEL], chips)
    return TpuSlices(shape, int(replicas))


def worker_group_slices(cluster: dict[str, Any]) -> list[tuple[TpuSlices, dict[str, Any]]]:
    """The TPU slices each worker group of a RayCluster spec asks for, with its pod spec (a
    group without TPUs left out): a release's, a RayJob's rayClusterSpec, a live cluster's. A
    group with no replicas given (its slices asked for by jobs) offers its maxReplicas."""
    found = []
    for group in cluster.get("workerGroupSpecs", []):
        pod = group["template"]["spec"]
        count = group["replicas"] if "replicas" in group else group.get("maxReplicas", 1)
        if slices := from_pod_spec(pod, count):
            found.append((slices, pod))
    return found


def cluster_slices(nodes: list[dict[str, Any]], offered: TpuSlices | None = None) -> TpuSlices:
    """The TPU slices the Ray cluster offers a job: a release's whole worker group where jobs
    ask for slices (`offered`: launcher.core.release_facts), else the slices whose hosts are
    up."""
    return offered or from_cluster_nodes(nodes)


def check_fits_cluster(
    slices: Slices,
    nodes: list[dict[str, Any]],
    min_slices: int | None = None,
    offered: TpuSlices | None = None,
) -> None:
    """Fails early when the cluster cannot hold the requested TPU slices (an elastic job: at
    least min_slices of them)."""
    if isinstance(slices, CpuSlices):
        return
    found = cluster_slices(nodes, offered)
    same = (found.shape.generation, found.shape.topology, found.shape.chips_per_host) == (
        slices.shape.generation,
        slices.shape.topology,
        slices.shape.chips_per_host,
    )
    needed = slices.num_slices if min_slices is None else min(min_slices, slices.num_slices)
    if not same or found.num_slices < needed:
        raise UsageError(
            "topology",
            f"asked for {slices.describe()} but the Ray cluster offers {found.describe()}",
            "match --accelerator_type/--topology/--num_slices to the cluster, or install the "
            "chart with the values file for the slice you want",
        )


def simulated_chips(nodes: list[dict[str, Any]]) -> bool:
    """Whether the cluster's TPU hosts are the local cluster's simulated ones."""
    return any(n.get("Labels", {}).get(LABEL_SIMULATED) == "true" for n in nodes if n.get("Alive"))
