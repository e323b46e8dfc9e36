"""What a release tells the jobs it runs, as one typed record: written once by the chart (one
JSON env, RELEASE_ENV, on every Ray pod of the release: `tpu-stack.releaseFacts`) and read by
this one type everywhere:

- on the head (and the idle check beside it): `ReleaseFacts.from_env()`;
- on a workstation, from the live release: `ReleaseFacts.of_cluster_spec(raycluster["spec"], where)`
  (`Release.facts()`), or from a RayJob's rendered rayClusterSpec before it is installed;
- from values files, before anything is installed: `launcher.core.values_file.release_facts`,
  held equal to the chart's render by tests/chart/test_release_facts.py.

A new fact costs one field here, one line in the helper and a golden. What a process needs of
its own pod, release or not, stays its own env: where the bucket is mounted here
(run_dir.OUTPUT_DIR_ENV, also the local cluster's), the memory tier's directory, and each TPU
host's capacity (capacity.CAPACITY_ENV, which vLLM's and Saxml's pods carry too).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from launcher.core.errors import UsageError
from launcher.core.job.checkpoint_tiers import BUCKET, MEMORY, TIERS, HostMemory
from launcher.core.quantities import quantity
from launcher.core.tpu.prices import checked_overrides
from launcher.core.tpu.slices import TpuSlices
from launcher.core.tpu.table import slice_shape

RELEASE_ENV = "LAUNCHER_RELEASE"
# Raised when a field changes meaning; a reader refuses facts of a version it does not know.
VERSION = 1


@dataclass(frozen=True)
class BucketMount:
    """The bucket a release's hosts mount (gcsfuse), and where they see it."""

    bucket: str
    mount: str


@dataclass(frozen=True)
class CpuSlice:
    """A release without TPUs: its simulated slice's hosts and JAX devices per host."""

    hosts: int
    devices_per_host: int


@dataclass(frozen=True)
class IdleRelease:
    """A standing release that gives its idle TPU slices back (ray.worker.tpu.
    releaseIdleAfterSeconds): its RayCluster, TPU worker group and quiet period."""

    cluster: str
    group: str
    after_s: float


@dataclass(frozen=True)
class ReleaseFacts:
    # The TPU worker group's slices (every slice, up or not; None: a release without TPUs).
    slices: TpuSlices | None = None
    cpu_slice: CpuSlice | None = None
    # The TPU workers' seconds to save on a notice (None: they get no notice).
    grace_seconds: int | None = None
    capacities: tuple[str, ...] = ()  # the TPU workers' capacity items, in order
    min_slices: int | None = None  # jobs are elastic down to this many slices by default
    checkpoint_tier: str = BUCKET  # the jobs' default tier (checkpoints.tier)
    memory_volume: str | None = None  # the memory tier's volume on each TPU host ("64Gi")
    memory_limit: str | None = None  # the TPU worker container's memory limit
    bucket: BucketMount | None = None
    prices: dict[str, dict[str, float]] = field(default_factory=dict)  # cost.pricesPerChipHour
    region: str = ""  # cost.region
    idle_release: IdleRelease | None = None
    known: bool = False  # read from a release or values (not: nothing to hold a job to)

    @property
    def offered_slices(self) -> TpuSlices | None:
        """The slices a job checks itself against where the release gives idle ones back (none
        may be up when it starts); None: the cluster's hosts up now."""
        return self.slices if self.idle_release else None

    @property
    def host_memory(self) -> HostMemory:
        """The tier and what the TPU worker pods hold for the memory tier."""
        return HostMemory(
            self.checkpoint_tier,
            quantity(self.memory_volume, memory=True) if self.memory_volume else None,
            quantity(self.memory_limit, memory=True) if self.memory_limit else None,
            known=self.known,
        )

    def to_json(self) -> str:
        data = asdict(self)
        del data["known"]
        slices = self.slices
        data["slices"] = slices and {
            "generation": slices.shape.generation.name,
            "topology": slices.shape.topology,
            "chips_per_host": slices.shape.chips_per_host,
            "slices": slices.num_slices,
        }
        data["capacities"] = list(self.capacities)
        return json.dumps({"version": VERSION, **data}, sort_keys=True)

    @classmethod
    def from_json(cls, raw: str, where: str = RELEASE_ENV) -> ReleaseFacts:
        """The chart's JSON, checked: anything else is refused with where it came from."""
        fix = "reinstall the release with this launcher's chart (tpu-launcher install)"
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("version") != VERSION:
                raise ValueError(f"not version {VERSION} of the release's facts")
            return cls._of(data, where)
        except (ValueError, KeyError, TypeError) as e:
            raise UsageError(where, f"cannot be read ({e}): {raw[:200]}", fix) from None

    @classmethod
    def _of(cls, data: dict[str, Any], where: str) -> ReleaseFacts:
        s, cpu, bucket, idle = (
            data.get(k) for k in ("slices", "cpu_slice", "bucket", "idle_release")
        )
        tier = str(data.get("checkpoint_tier") or BUCKET)
        if tier not in TIERS:
            raise ValueError(f"checkpoint tier {tier!r} is none of {', '.join(TIERS)}")
        grace, minimum = data.get("grace_seconds"), data.get("min_slices")
        return cls(
            slices=s
            and TpuSlices(
                slice_shape(str(s["generation"]), str(s["topology"]), int(s["chips_per_host"])),
                int(s["slices"]),
            ),
            cpu_slice=cpu and CpuSlice(int(cpu["hosts"]), int(cpu["devices_per_host"])),
            grace_seconds=None if grace is None else int(grace),
            capacities=tuple(str(w) for w in data.get("capacities") or ()),
            min_slices=int(minimum) if minimum else None,
            checkpoint_tier=tier,
            memory_volume=_text(data.get("memory_volume")) if tier == MEMORY else None,
            memory_limit=_text(data.get("memory_limit")),
            bucket=bucket and BucketMount(str(bucket["bucket"]), str(bucket["mount"])),
            prices=checked_overrides(data.get("prices") or {}, f"{where} prices"),
            region=str(data.get("region") or ""),
            idle_release=idle
            and IdleRelease(str(idle["cluster"]), str(idle["group"]), float(idle["after_s"])),
            known=True,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ReleaseFacts:
        """On a release's pod: what the chart wrote; elsewhere (the local cluster): none."""
        raw = env.get(RELEASE_ENV)
        return cls.from_json(raw) if raw else cls()

    @classmethod
    def of_cluster_spec(cls, spec: dict[str, Any], where: str) -> ReleaseFacts | None:
        """The facts a RayCluster spec's head carries (a RayJob's rayClusterSpec too); None
        where it carries none (a chart from before them)."""
        head = spec.get("headGroupSpec", {}).get("template", {}).get("spec", {})
        for container in head.get("containers", [])[:1]:
            for env in container.get("env") or []:
                if env.get("name") == RELEASE_ENV and env.get("value"):
                    return cls.from_json(str(env["value"]), where)
        return None


def _text(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


NO_RELEASE = ReleaseFacts()  # the local cluster's jobs, and jobs planned for no release
