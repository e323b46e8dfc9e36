"""Will a save on a preemption notice fit in the worker pods' grace period? From the compiled
step's per-device state: each host writes its devices' shards of the parameters and optimizer
state (one copy of the model: slices beyond the first hold replicas, which Orbax does not write
again), so the checkpoint per host is the state per device times the devices per host.

The write speed is assumed, not measured (a workstation's upload says nothing of a TPU host's):
SAVE_GIB_PER_S per host, a quarter of what gcsfuse's own published fio benchmark writes on a
100 Gbps VM with large files (2.6 to 4.4 GiB/s), since a save is one burst of many shard files
through one mount. The grace period needs the save twice over (a slow write, a step in flight
when the notice comes) plus the preStop hook's margin."""

from __future__ import annotations

import math
from dataclasses import dataclass

from launcher.core.job.checkpoint_tiers import (
    BUCKET,
    MEMORY,
    HostMemory,
    TierPlan,
    memory_gib_per_host,
    memory_volume_size,
)
from launcher.core.package_version import doc
from launcher.core.tpu.capacity import FLEX_START, SPOT
from launcher.core.tpu.preemption import (
    PRESTOP_MARGIN_S,
    SPOT_CRITICAL_PODS_S,
    SPOT_POD_SHUTDOWN_S,
    SPOT_SHUTDOWN_MAX_S,
)
from launcher.core.tpu.slices import TpuSlices
from launcher.preflight.memory_report import MemoryReport

SAVE_GIB_PER_S = 1.0
# The memory tier's write and read, per host: assumed, not measured either. A save copies the
# host's shards from HBM to host memory (PCIe) into a tmpfs; a quarter of a PCIe 4.0 x16 link's
# 32 GB/s, for the same reasons as above. A restore from memory also broadcasts the copy from
# the slice that holds it to the others over DCN, at the same rate.
MEMORY_GIB_PER_S = 8.0
GRACE_VALUE = "ray.worker.terminationGracePeriodSeconds"


@dataclass(frozen=True)
class SaveEstimate:
    gib_per_host: float
    gib_total: float  # one copy of the state: the checkpoint's size
    grace_seconds: int | None  # None: the worker pods send no notice
    grace_source: str  # where the grace period was read
    capacities: tuple[str, ...] = ()  # the workers' capacity items, in order (a fallback: several)

    @property
    def write_seconds(self) -> float:
        return self.gib_per_host / SAVE_GIB_PER_S

    @property
    def needed_grace(self) -> int:
        """The grace period to ask for: the save twice over plus the hook's margin, in tens."""
        return max(10, math.ceil((2 * self.write_seconds + PRESTOP_MARGIN_S) / 10) * 10)

    @property
    def fits(self) -> bool:
        return self.grace_seconds is not None and self.grace_seconds >= self.needed_grace

    def render(self) -> str:
        lines = [
            f"preflight: the save a preemption notice starts ({self.gib_total:.2f} GiB in all, "
            f"{self.gib_per_host:.2f} GiB per host):",
            f"  {'write per host':<40} about {self.write_seconds:.0f}s at {SAVE_GIB_PER_S:g} "
            "GiB/s (assumed: gcsfuse to the bucket)",
        ]
        if self.grace_seconds is None:
            lines.append(f"  {'grace period':<40} none: {self.grace_source} sends no notice")
            verdict = (
                "NO SAVE ON A NOTICE (a reclaim resumes from the last periodic checkpoint); "
                f"set {GRACE_VALUE}: {self.needed_grace}"
            )
        else:
            lines.append(
                f"  {'grace period':<40} {self.grace_seconds}s ({self.grace_source}), "
                f"{PRESTOP_MARGIN_S}s of it the preStop hook's"
            )
            if not self.fits:
                verdict = (
                    "TOO SHORT to save on a notice (a reclaim resumes from the last periodic "
                    f"checkpoint); set {GRACE_VALUE}: {self.needed_grace}"
                )
            elif self.needed_grace <= SPOT_POD_SHUTDOWN_S:
                verdict = "covers it"
            else:
                verdict = (
                    f"covers it; on Spot capacity only where the node pool gives pods more than "
                    f"GKE's {SPOT_POD_SHUTDOWN_S}s of a reclaim's notice ({doc('jobs.md')})"
                )
        lines.append(f"  verdict: {verdict}")
        if len(self.capacities) > 1 and self.fits:
            lines.append("  per capacity, in the fallback's order:")
            lines += [f"    {word:<38} {self.on(word)}" for word in self.capacities]
        return "\n".join(lines)

    def render_tiers(self, tiers: TierPlan, host: HostMemory) -> str:
        """Each checkpoint tier's save and restore for this job, and what its own tier asks of
        the TPU hosts' memory."""
        bucket_s = self.write_seconds
        memory_s = self.gib_per_host / MEMORY_GIB_PER_S
        needed = memory_gib_per_host(self.gib_per_host)
        mine = tiers.tier
        lines = [
            "preflight: checkpoint tiers (per host; assumed rates, not measured):",
            f"  {'bucket' + (' (this job)' if mine == BUCKET else ''):<24} save about "
            f"{bucket_s:.0f}s at {SAVE_GIB_PER_S:g} GiB/s, restore about {bucket_s:.0f}s "
            "(gcsfuse)",
            f"  {'memory' + (' (this job)' if mine == MEMORY else ''):<24} save about "
            f"{memory_s:.1f}s at {MEMORY_GIB_PER_S:g} GiB/s, restore about {memory_s:.1f}s from "
            f"a slice's memory; {needed:.1f} GiB of memory per host "
            f"(checkpoints.memorySize={memory_volume_size(self.gib_per_host)}); 2 slices or more",
        ]
        if mine == MEMORY:
            volume = (
                f"{host.volume_gib:.1f} GiB" if host.volume_gib is not None else "not known here"
            )
            lines += [
                f"  {tiers.describe()}",
                f"  the release's volume per host: {volume}",
                "  a notice's save: Orbax's emergency manager forces it on every slice, the first "
                "slice's hosts to the bucket: the grace period above must cover the bucket's "
                "write",
            ]
        return "\n".join(lines)

    def on(self, word: str) -> str:
        """What a notice on one capacity item gives the save (the grace period fits)."""
        name = word.partition(":")[0]
        if name == SPOT:
            most = SPOT_SHUTDOWN_MAX_S - SPOT_CRITICAL_PODS_S
            if self.needed_grace <= SPOT_POD_SHUTDOWN_S:
                return "covers it"
            if self.needed_grace <= most:
                return (
                    f"covers it where the pool's shutdown is {SPOT_SHUTDOWN_MAX_S}s (gke plan "
                    f"makes it so; GKE's default gives {SPOT_POD_SHUTDOWN_S}s)"
                )
            return f"TOO SHORT: a Spot reclaim gives pods at most {most}s"
        if name == FLEX_START:
            return "covers it (a reclaim: counted as a preemption)"
        return (
            "covers it; a notice here is a maintenance event or a scale-down, counted as a "
            "failure (--max_failures)"
        )


def estimate_save(
    report: MemoryReport,
    slices: TpuSlices,
    grace_seconds: int | None,
    grace_source: str,
    capacities: tuple[str, ...] = (),
) -> SaveEstimate | None:
    """None where the compile stopped before it measured the state (XLA's overflow report)."""
    if report.arguments_gib <= 0:
        return None
    per_host = report.arguments_gib * slices.devices_per_host
    return SaveEstimate(
        gib_per_host=per_host,
        gib_total=per_host * slices.hosts_per_slice,
        grace_seconds=grace_seconds,
        grace_source=grace_source,
        capacities=capacities,
    )
