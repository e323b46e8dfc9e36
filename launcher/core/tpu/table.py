"""The one table of Cloud TPU facts: every other part of the project derives from it.

Hosts are never stated, only derived: hosts = chips in the topology / chips per host, the same
rule the GKE TPU webhook enforces on a RayCluster. The chart reads a JSON export of this table
(`tpu-launcher tpu-table --json`, checked for drift by a test), so nothing is copied by hand.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from launcher.core.errors import UsageError
from launcher.core.tpu.capacity import fallback_json as capacity_fallback_json
from launcher.core.tpu.capacity import queued_json as capacity_queued_json
from launcher.core.tpu.capacity import shared_reservation_json
from launcher.core.tpu.capacity import table_json as capacity_table_json
from launcher.core.tpu.prices import table_json as prices_table_json


@dataclass(frozen=True)
class Generation:
    """One TPU generation as GKE, Ray and MaxText name it."""

    name: str  # our canonical short name, also MaxText's compile_topology prefix
    ray_version: str  # Ray's accelerator version ("v5litepod" for v5e, "v7x" for tpu7x)
    gke_accelerator: str  # node label cloud.google.com/gke-tpu-accelerator
    cores_per_chip: int  # TensorCores per chip: pod type names count cores
    hbm_gib: float  # HBM per chip
    peak_bf16_tflops: float  # per chip
    hbm_gbps: float  # HBM bandwidth per chip, GB/s
    ici_gbps: float  # ICI bandwidth per chip, Gbit/s (all links)
    topologies: tuple[str, ...]  # topologies GKE offers for this generation
    # chips per host -> machine type; single-host shapes use the machine whose chips = topology
    machines: dict[int, str] = field(default_factory=dict)
    multi_host_chips: int = 4  # chips per host of multi-host slices
    # Extra `gcloud container node-pools create` flags GKE's guides give for this generation.
    node_pool_flags: tuple[str, ...] = ()
    # JAX devices per chip. v4 and v5p run their two TensorCores as one (megacore) device;
    # tpu7x shows each TensorCore as a device, so its per-device HBM and peak are half a chip's.
    devices_per_chip: int = 1
    # Cloud TPU's accelerator-type prefix where it is not Ray's version (tpu7x-16, Ray's v7x-16).
    type_prefix: str = ""
    # Multi-host node pools are placed by a workload policy (`--placement-policy`) that names
    # the topology, instead of `--tpu-topology` (GKE: "About Ironwood (TPU7x) in GKE").
    workload_policy: bool = False
    min_gke_version: str = ""  # the oldest GKE Standard version that offers this generation
    # The zones Cloud TPU offers it in (ZONES_SOURCE); `gke plan` refuses any other.
    zones: tuple[str, ...] = ()
    # GKE's flex-start (Dynamic Workload Scheduler) offers it: not TPU v3 or v4 ("About
    # flex-start provisioning mode").
    flex_start: bool = True
    # The zones GKE offers it in on flex-start (FLEX_START_ZONES_SOURCE): fewer than `zones`.
    flex_start_zones: tuple[str, ...] = ()

    @property
    def ray_accelerator_type(self) -> str:
        return f"TPU-{self.ray_version.upper()}"

    @property
    def cloud_tpu_prefix(self) -> str:
        return self.type_prefix or self.ray_version

    def per_device(self, per_chip: float) -> float:
        """A chip's figure (HBM, peak, bandwidth) for one JAX device: half of it on tpu7x."""
        return per_chip / self.devices_per_chip

    @property
    def dims(self) -> int:
        return self.topologies[0].count("x") + 1


# Cloud TPU's "TPU regions and zones" (docs.cloud.google.com/tpu/docs/regions-zones, read
# 2026-11): "You can create TPU VMs in the zones shown in the following table", per generation;
# GKE's "Plan TPUs in GKE": "To use a TPU type in your GKE workload, your cluster must be in a
# supported region for that type." Single-tenant zones the page marks as such are left out.
# `gke plan --allow-zone Z` takes a zone Google has added since.
ZONES_SOURCE = "Cloud TPU: TPU regions and zones (docs.cloud.google.com/tpu/docs/regions-zones)"
# GKE's "About flex-start provisioning mode" (docs.cloud.google.com/kubernetes-engine/docs/
# concepts/dws, read 2026-11): "To run TPUs, use GKE version 1.33.0-gke.1712000 or later.
# Flex-start supports the following version and zones": TPU v6e asia-northeast1-b, us-east5-a
# and us-east5-b; TPU v5e us-west4-a; TPU v5p us-east5-a; "TPU v3 and v4 are not supported".
# TPU7x is not listed: no zone is known to offer it on flex-start (`--allow-zone` takes one).
FLEX_START_ZONES_SOURCE = (
    "GKE: About flex-start provisioning mode (docs.cloud.google.com/kubernetes-engine/docs/"
    "concepts/dws)"
)

GENERATIONS: dict[str, Generation] = {
    g.name: g
    for g in (
        Generation(
            name="v4",
            ray_version="v4",
            gke_accelerator="tpu-v4-podslice",
            cores_per_chip=2,
            hbm_gib=32,
            peak_bf16_tflops=275,
            hbm_gbps=1228,
            ici_gbps=2400,
            topologies=("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8"),
            machines={4: "ct4p-hightpu-4t"},
            flex_start=False,
            zones=("us-central2-b",),
        ),
        Generation(
            name="v5e",
            ray_version="v5litepod",
            gke_accelerator="tpu-v5-lite-podslice",
            cores_per_chip=1,
            hbm_gib=16,
            peak_bf16_tflops=197,
            hbm_gbps=819,
            ici_gbps=1600,
            topologies=("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"),
            machines={1: "ct5lp-hightpu-1t", 4: "ct5lp-hightpu-4t", 8: "ct5lp-hightpu-8t"},
            zones=(
                *("us-central1-a", "us-south1-a", "us-west1-c", "us-west4-a"),
                *("europe-west4-b", "asia-southeast1-b"),
            ),
            flex_start_zones=("us-west4-a",),
        ),
        Generation(
            name="v5p",
            ray_version="v5p",
            gke_accelerator="tpu-v5p-slice",
            cores_per_chip=2,
            hbm_gib=95,
            peak_bf16_tflops=459,
            hbm_gbps=2765,
            ici_gbps=4800,
            # Cloud TPU's v5p shapes up to its largest slice, 16x16x24 (6,144 chips, v5p-12288).
            topologies=(
                *("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8"),
                *("8x8x16", "8x16x16", "16x16x16", "16x16x24"),
            ),
            machines={4: "ct5p-hightpu-4t"},
            zones=("us-central1-a", "us-east5-a", "europe-west4-b"),
            flex_start_zones=("us-east5-a",),
        ),
        Generation(
            name="v6e",
            ray_version="v6e",
            gke_accelerator="tpu-v6e-slice",
            cores_per_chip=1,
            hbm_gib=32,
            peak_bf16_tflops=918,
            hbm_gbps=1640,
            ici_gbps=3584,
            topologies=("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"),
            machines={1: "ct6e-standard-1t", 4: "ct6e-standard-4t", 8: "ct6e-standard-8t"},
            # GKE's "Train an LLM using JAX, Ray Train, and TPU Trillium" tutorial creates its
            # v6e-16 pool with one thread per core.
            node_pool_flags=("--threads-per-core=1",),
            # Ray's "Start Google Cloud GKE Cluster with TPUs for KubeRay": "TPU v6e is
            # supported in GKE versions 1.31.2-gke.1115000 or later".
            min_gke_version="1.31.2-gke.1115000",
            zones=(
                *("us-central1-b", "us-east1-d", "us-east5-a", "us-east5-b"),
                *("us-central1-ai1a", "us-south1-ai1b", "europe-west4-a", "asia-northeast1-b"),
                "southamerica-west1-a",
            ),
            flex_start_zones=("asia-northeast1-b", "us-east5-a", "us-east5-b"),
        ),
        # Ironwood. Cloud TPU's "TPU7x (Ironwood)" page: 2 TensorCores per chip, each a JAX
        # device (the pinned libtpu's get_topology_desc("tpu7x:2x2x2") gives 16 devices of
        # kind TPU7x, 8 per host); 2,307 TFLOP/s bf16, 192 GiB HBM at 7,380 GB/s per chip;
        # ICI per chip as v5p's in that page's side-by-side table (1,200 GB/s both ways).
        # GKE's "About Ironwood (TPU7x)": label tpu7x, 4 chips per VM (tpu7x-standard-4t),
        # workload policies for multi-host pools, GKE Standard 1.34.0-gke.2201000 or later.
        # Topologies: Ray 2.60's VALID_TPU_TOPOLOGY["v7x"] (all in MaxText's
        # accelerator_to_spec_map; Ray knows no 1x1x1, so tpu7x-2 is left out).
        # Names count TensorCores as MaxText and Cloud TPU do: tpu7x-16 = 2x2x2 = 8 chips.
        Generation(
            name="tpu7x",
            ray_version="v7x",
            type_prefix="tpu7x",
            gke_accelerator="tpu7x",
            cores_per_chip=2,
            devices_per_chip=2,
            hbm_gib=192,
            peak_bf16_tflops=2307,
            hbm_gbps=7380,
            ici_gbps=4800,
            topologies=(
                "2x2x1",
                "2x2x2",
                "2x2x4",
                "2x4x4",
                "4x4x4",
                "4x4x8",
                "4x8x8",
                "8x8x8",
                "8x8x16",
                "8x16x16",
            ),
            machines={4: "tpu7x-standard-4t"},
            workload_policy=True,
            min_gke_version="1.34.0-gke.2201000",
            zones=("us-central1-c", "us-central1-ai1a"),
        ),
    )
}


# Every zone the table lists (on-demand and flex-start) -> its region. Compute Engine's
# "Regions and zones": a zone's name is its region's and a suffix (us-east5-b is in us-east5);
# "About AI zones": an AI zone is one of its region's too (us-central1-ai1a is in us-central1).
TPU_ZONES: dict[str, str] = {
    zone: zone.rsplit("-", 1)[0]
    for g in GENERATIONS.values()
    for zone in (*g.zones, *g.flex_start_zones)
}


def region_of_zone(location: str) -> str | None:
    """The region a zone is in, None where `location` is a region. A zone the table does not
    list (a CPU-only release's, --allow-zone) is told by its name: a region's name has one
    hyphen (us-east5, northamerica-northeast1), a zone's one more (us-east5-b, us-south1-ai1b)."""
    if location in TPU_ZONES:
        return TPU_ZONES[location]
    region, dash, _ = location.rpartition("-")
    return region if dash and region.count("-") == 1 else None


# Compute Engine's "AI zones": an AI zone's name is its region's, `ai`, a number and the suffix
# of its parent zone, the standard zone of that suffix (us-central1-a is us-central1-ai1a's).
AI_ZONE = re.compile(r"^(?P<region>[a-z]+-[a-z]+\d+)-ai\d+(?P<suffix>[a-z])$")
AI_ZONES_SOURCE = (
    'Compute Engine\'s "AI zones" (docs.cloud.google.com/compute/docs/regions-zones/ai-zones)'
)


def parent_zone(zone: str) -> str | None:
    """The standard zone an AI zone is paired with (None: `zone` is no AI zone)."""
    found = AI_ZONE.match(zone)
    return f"{found['region']}-{found['suffix']}" if found else None


def gke_version(text: str) -> tuple[int, ...]:
    """1.34.0-gke.2201000 -> (1, 34, 0, 2201000): GKE's versions compare number by number."""
    return tuple(int(n) for n in re.findall(r"\d+", text))


def device_noun(devices_per_chip: int) -> str:
    """What a per-device figure is called: the chip, where a device is one (all but tpu7x)."""
    return "chip" if devices_per_chip == 1 else "device"


# GKE's node labels for a TPU host's slice shape (the chart selects on them; GKE sets them).
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
GKE_TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"


# Every spelling a user may reasonably type, mapped to the canonical name.
_ALIASES = {
    **{g.name: g.name for g in GENERATIONS.values()},
    **{g.ray_version: g.name for g in GENERATIONS.values()},
    **{g.ray_accelerator_type.lower(): g.name for g in GENERATIONS.values()},
    **{g.gke_accelerator: g.name for g in GENERATIONS.values()},
    "v5litepod": "v5e",
}


@dataclass(frozen=True)
class SliceShape:
    """One slice: a generation laid out in a topology over hosts of equal chip count."""

    generation: Generation
    topology: str
    chips_per_host: int

    @property
    def chips(self) -> int:
        return topology_chips(self.topology)

    @property
    def hosts(self) -> int:
        return max(1, self.chips // self.chips_per_host)

    @property
    def machine_type(self) -> str:
        return self.generation.machines[self.chips_per_host]

    @property
    def devices_per_host(self) -> int:
        """JAX devices on each host: chips, or two per chip on tpu7x."""
        return self.chips_per_host * self.generation.devices_per_chip

    @property
    def devices(self) -> int:
        return self.chips * self.generation.devices_per_chip

    @property
    def name(self) -> str:
        """Cloud TPU's name for the slice, counted in cores (v5p-16 = 8 chips, tpu7x-16)."""
        return f"{self.generation.cloud_tpu_prefix}-{self.chips * self.generation.cores_per_chip}"

    @property
    def pod_type(self) -> str:
        """Ray's name for the slice (its `TPU-<pod type>-head` resource and pod-type label):
        Cloud TPU's, but for Ironwood, which Ray spells v7x-16."""
        return f"{self.generation.ray_version}-{self.chips * self.generation.cores_per_chip}"

    @property
    def compile_topology(self) -> str:
        """MaxText's `compile_topology` name, counted like the pod type (v6e-16, v5p-16)."""
        return f"{self.generation.name}-{self.chips * self.generation.cores_per_chip}"

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1


def host_sizes(gen: Generation, topology: str) -> list[int]:
    """Chips per host GKE can build `topology` from: one machine holding it all, or 4-chip hosts."""
    chips = topology_chips(topology)
    return sorted(
        c for c in gen.machines if c == chips or (c == gen.multi_host_chips and chips % c == 0)
    )


def topology_chips(topology: str) -> int:
    return reduce(lambda a, b: a * b, (int(d) for d in topology.split("x")), 1)


def generation(accelerator: str) -> Generation:
    """Looks up a generation by any of its names: v6e, TPU-V6E, tpu-v6e-slice, v5litepod."""
    key = accelerator.strip().lower()
    if key not in _ALIASES:
        raise UsageError(
            field="accelerator_type",
            problem=f"unknown TPU accelerator type {accelerator!r}",
            fix=f"use one of {', '.join(sorted(GENERATIONS))} "
            "(Ray's TPU-V6E and GKE's tpu-v6e-slice spellings work too)",
        )
    return GENERATIONS[_ALIASES[key]]


def slice_shape(accelerator: str, topology: str, chips_per_host: int | None = None) -> SliceShape:
    """Validates a (generation, topology[, chips per host]) and returns the slice it describes.

    `chips_per_host` is only needed where GKE offers two machines for one topology (v5e/v6e 2x4:
    one 8-chip host or two 4-chip hosts); by default a topology that fits one machine is one host.
    """
    gen = generation(accelerator)
    topo = topology.strip().lower()
    if topo not in gen.topologies:
        raise UsageError(
            field="topology",
            problem=f"{topology!r} is not a {gen.name} topology",
            fix=f"use one of {', '.join(gen.topologies)}",
        )
    valid = host_sizes(gen, topo)
    if chips_per_host is None:
        chips_per_host = default_chips_per_host(gen, topo)
    if chips_per_host not in valid:
        raise UsageError(
            field="chips_per_host",
            problem=f"{gen.name} {topo} cannot be built from hosts of {chips_per_host} chips",
            fix=f"use chips per host {' or '.join(map(str, valid))} for this topology",
        )
    return SliceShape(gen, topo, chips_per_host)


def _name_prefixes(gen: Generation) -> tuple[str, ...]:
    """How users write a generation in a slice name: Cloud TPU's prefix first (v5litepod,
    tpu7x), then Ray's and the short name where they differ (v5e, v7x)."""
    return tuple(dict.fromkeys((gen.cloud_tpu_prefix, gen.ray_version, gen.name)))


def tpu_type_names() -> dict[str, tuple[str, str]]:
    """Every slice name users type, as Cloud TPU's accelerator types and Ray's pod types spell
    them, -> (generation, topology). v4, v5p and tpu7x names count TensorCores (v5p-16 = 8
    chips), v5e and v6e names count chips; v5e is `v5litepod-N`, and `v5e-N` is accepted too;
    Ironwood is `tpu7x-N`, and Ray's `v7x-N` is accepted too."""
    names = {}
    for gen in GENERATIONS.values():
        for topo in gen.topologies:
            count = topology_chips(topo) * gen.cores_per_chip
            names.update({f"{prefix}-{count}": (gen.name, topo) for prefix in _name_prefixes(gen)})
    return names


def names_by_prefix() -> dict[str, list[str]]:
    """The valid names of each prefix (v6e, v5litepod, v5e, ...), smallest slice first."""
    out: dict[str, list[str]] = {}
    for name in tpu_type_names():
        out.setdefault(name.rsplit("-", 1)[0], []).append(name)
    return {p: sorted(n, key=lambda n: int(n.rsplit("-", 1)[1])) for p, n in out.items()}


def closest_names(name: str) -> list[str]:
    """The valid names next to an unknown one: the neighbours below and above its count in the
    same generation (v6e-20 -> v6e-16, v6e-32). The chart applies the same rule to the same
    lists (`names` in its copy of the table), so both refuse a typo with the same suggestion."""
    by_prefix = names_by_prefix()
    prefix, _, count = name.strip().lower().rpartition("-")
    if prefix not in by_prefix:
        close = difflib.get_close_matches(prefix, by_prefix, n=1, cutoff=0.5)
        if not close:
            return []
        prefix = close[0]
    names = by_prefix[prefix]
    if f"{prefix}-{count}" in names:  # only the prefix was mistyped: v6-16
        return [f"{prefix}-{count}"]
    if not count.isdigit():
        return names[:4]
    counts = [int(n.rsplit("-", 1)[1]) for n in names]
    below = [n for n, c in zip(names, counts, strict=True) if c < int(count)][-1:]
    above = [n for n, c in zip(names, counts, strict=True) if c > int(count)][:1]
    return below + above


UNKNOWN_TPU_FIX = (
    "name a slice as Cloud TPU does: v4-16, v5p-16, v5litepod-32, v6e-16, tpu7x-16 "
    "(`tpu-launcher tpu-table` lists them)"
)


def tpu_type(name: str, chips_per_host: int | None = None) -> SliceShape:
    """The slice a name such as v6e-16, v5p-16 or v5litepod-32 stands for. Where GKE builds the
    shape from two host sizes (v5e/v6e 2x4: one host of 8 chips or two of 4), one host is the
    default and `chips_per_host` chooses."""
    names = tpu_type_names()
    key = name.strip().lower()
    if key not in names:
        close = closest_names(key)
        raise UsageError(
            field="tpu",
            problem=f"unknown TPU type {name!r}",
            fix=f"did you mean {' or '.join(close)}?" if close else UNKNOWN_TPU_FIX,
        )
    generation_name, topology = names[key]
    return slice_shape(generation_name, topology, chips_per_host)


def default_chips_per_host(gen: Generation, topology: str) -> int:
    """One host where one machine holds the topology, else the generation's multi-host size."""
    chips = topology_chips(topology)
    return chips if chips in host_sizes(gen, topology) else gen.multi_host_chips


def as_json_table() -> dict[str, Any]:
    """The table as the chart consumes it (charts/tpu-stack/files/tpu-table.json): the
    generations with their topologies and hosts, and every slice name with the topologies it
    may stand for (the first is the default) and the names of each prefix for suggestions."""
    generations: dict[str, Any] = {}
    for gen in GENERATIONS.values():
        shapes = {}
        for topo in gen.topologies:
            chips = topology_chips(topo)
            shapes[topo] = {
                "chips": chips,
                "defaultChipsPerHost": default_chips_per_host(gen, topo),
                "chipsPerHost": {
                    str(c): {"hosts": chips // c, "machineType": gen.machines[c]}
                    for c in host_sizes(gen, topo)
                },
            }
        generations[gen.name] = {
            "gkeAccelerator": gen.gke_accelerator,
            "rayAcceleratorType": gen.ray_accelerator_type,
            "hbmGiB": gen.hbm_gib,
            "peakBf16TFLOPs": gen.peak_bf16_tflops,
            "devicesPerChip": gen.devices_per_chip,
            "flexStart": gen.flex_start,
            "topologies": shapes,
        }
    names: dict[str, Any] = {}
    for name, (gen_name, topo) in tpu_type_names().items():
        canonical = slice_shape(gen_name, topo).name
        entry = names.setdefault(
            name, {"generation": gen_name, "canonical": canonical, "topologies": []}
        )
        entry["topologies"].append(topo)
    return {
        "capacities": capacity_table_json(),
        "queuedProvisioning": capacity_queued_json(),
        "capacityFallback": capacity_fallback_json(),
        "sharedReservation": shared_reservation_json(),
        "generations": generations,
        "names": names,
        "namesByPrefix": names_by_prefix(),
        "unknownNameFix": UNKNOWN_TPU_FIX,
        "prices": prices_table_json(),
    }
