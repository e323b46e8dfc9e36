"""Where a job's checkpoints go: the tiers (`checkpoints.tier` in the release's values, a job's
`--checkpoint_tier`), what each asks of MaxText, and what each refuses, once for the chart, the
workstation's checks and the hosts.

- `bucket`: every save through gcsfuse to the bucket (MaxText's default checkpointing).
- `memory`: Orbax's emergency checkpointing through MaxText (`enable_emergency_checkpoint`): every
  `local_checkpoint_period` steps to each TPU host's memory volume, every `checkpoint_period`
  steps to the bucket; a restart restores from a slice whose hosts still hold the latest copy,
  else from the bucket. Orbax keeps the in-memory copies on the slices other than the first (the
  first slice writes the bucket's), so the tier needs two slices or more: with one, Orbax's
  emergency CheckpointManager has one replica and drops the local directory (orbax/checkpoint/
  experimental/emergency/checkpoint_manager.py, CheckpointManager.__init__).
- `multi-tier`: GKE's managed multi-tier checkpointing. Refused: see MULTI_TIER_REFUSAL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from launcher.core.errors import UsageError
from launcher.core.maxtext.args import MaxTextArgs

BUCKET, MEMORY, MULTI_TIER = TIERS = ("bucket", "memory", "multi-tier")
# Where each TPU host's memory volume is mounted (the chart's emptyDir of medium Memory; the
# local cluster's per-host directory): MaxText's local_checkpoint_directory on that host.
MEMORY_DIR_ENV = "LAUNCHER_MEMORY_CHECKPOINT_DIR"
# Copies each host keeps in memory: the one being written and the last whole one. MaxText's
# guides (docs/guides/checkpointing_solutions/) size the ramdisk at 2 x (checkpoint / hosts) x
# 1.15, the 1.15 being Orbax's metadata and the files' slack.
MEMORY_COPIES = 2
MEMORY_SLACK = 1.15
# The in-memory saves per bucket save when the job gives no local_checkpoint_period.
DEFAULT_SAVES_PER_BUCKET_SAVE = 5
# --continuous_checkpointing: MaxText's enable_continuous_checkpointing (a save to the bucket as
# soon as the previous one finished, whatever checkpoint_period says). `auto`: on where the
# slices' capacity is taken back with a notice (Spot, flex-start), where the steps since the
# last save are the ones a reclaim without time to save loses.
CONTINUOUS = ("auto", "on", "off")
# The checkpoints continuous saving keeps (MaxText's max_num_checkpoints_to_keep, unless the
# job sets it): the bucket would otherwise hold one every few steps of the whole run.
CONTINUOUS_KEPT = 3

MULTI_TIER_REFUSAL = (
    "GKE's multi-tier checkpointing (MaxText's enable_multi_tier_checkpointing) starts "
    "jax.distributed itself, with the process ids its CSI driver writes to jax-init-info.txt for "
    "a JobSet's pods (orbax/checkpoint/experimental/emergency/multi_tier_checkpointing/"
    "initialization.py: initialize_multi_tier_checkpointing; its run name defaults to "
    "JOBSET_NAME), and GKE documents it for JobSet workloads; on a RayCluster Ray Train's "
    "JaxTrainer has started jax.distributed on every host before MaxText runs, so MaxText "
    "skips that start and no replicator is ever configured"
)


# MaxText's keys this module sets that decide where and when checkpoints go and nothing of the
# compiled step: preflight's compile leaves them out (MaxText's config model also wants the
# memory tier's local_checkpoint_directory, which only a host has) and its cache ignores them.
CHECKPOINT_ONLY_KEYS = (
    "enable_emergency_checkpoint",
    "local_checkpoint_directory",
    "local_checkpoint_period",
    "enable_continuous_checkpointing",
    "max_num_checkpoints_to_keep",
)

# The chart's name for the volume in the TPU worker pods (templates/ray/_pod.tpl), by which a
# release's pods are read back.
MEMORY_VOLUME = "checkpoints-memory"


@dataclass(frozen=True)
class HostMemory:
    """What a release's TPU worker pods give the memory tier, as its values or its RayCluster
    say: its default tier, the in-memory volume and the container's memory limit (GiB; None:
    none)."""

    tier: str = BUCKET
    volume_gib: float | None = None
    limit_gib: float | None = None
    known: bool = False  # read from a release or values files (not: nothing to hold a job to)

    def refusal(self, checkpoint_gib_per_host: float) -> UsageError | None:
        """Why a job on the memory tier with this much checkpoint per host cannot run on these
        pods (None: it fits)."""
        needed = memory_gib_per_host(checkpoint_gib_per_host)
        size = memory_volume_size(checkpoint_gib_per_host)
        if self.known and self.tier != MEMORY:
            return UsageError(
                "checkpoint_tier",
                "memory, and the release's TPU workers have no in-memory volume "
                f"(checkpoints.tier is {self.tier})",
                f"helm upgrade with --set checkpoints.tier=memory --set "
                f"checkpoints.memorySize={size}, or submit with --checkpoint_tier=bucket",
            )
        if self.limit_gib is not None and needed >= self.limit_gib:
            return UsageError(
                "ray.worker.resources.limits.memory",
                f"the memory tier keeps {needed:.1f} GiB per TPU host ({MEMORY_COPIES} copies of "
                f"the host's {checkpoint_gib_per_host:.1f} GiB of checkpoint, plus "
                f"{MEMORY_SLACK - 1:.0%}), not below the worker's memory limit of "
                f"{self.limit_gib:.1f} GiB, which also holds the training process and Ray's "
                "object store",
                "raise the limit, or keep --checkpoint_tier=bucket for this job",
            )
        if self.volume_gib is not None and needed > self.volume_gib:
            return UsageError(
                "checkpoints.memorySize",
                f"the release's in-memory volume holds {self.volume_gib:.1f} GiB per TPU host and "
                f"the memory tier needs {needed:.1f} GiB ({MEMORY_COPIES} copies of the host's "
                f"{checkpoint_gib_per_host:.1f} GiB of checkpoint, plus {MEMORY_SLACK - 1:.0%})",
                f"helm upgrade with --set checkpoints.memorySize={size}, or keep "
                "--checkpoint_tier=bucket for this job",
            )
        return None


def memory_gib_per_host(checkpoint_gib_per_host: float) -> float:
    """The memory volume a TPU host needs for the tier (see MEMORY_COPIES)."""
    return MEMORY_COPIES * checkpoint_gib_per_host * MEMORY_SLACK


def memory_volume_size(checkpoint_gib_per_host: float) -> str:
    """The volume's sizeLimit, as Kubernetes writes a quantity: whole GiB, rounded up."""
    return f"{max(1, math.ceil(memory_gib_per_host(checkpoint_gib_per_host)))}Gi"


@dataclass(frozen=True)
class TierPlan:
    """A job's tier and MaxText's periods for it."""

    tier: str
    memory_period: int | None  # steps between in-memory saves (the memory tier)
    bucket_period: int

    def tier_of_save(self, step: int, forced: bool = False) -> str:
        """Where MaxText's save of `step` went: a bucket period's step, or a forced save (the
        last step's, a notice's: Orbax's emergency manager then saves on every slice, the
        first slice's hosts to the bucket), is in the bucket; the others in memory only."""
        if self.memory_period is None or forced or step % self.bucket_period == 0:
            return BUCKET
        return MEMORY

    def describe(self) -> str:
        if self.memory_period is None:
            return f"checkpoints: to the bucket every {self.bucket_period} steps"
        every = "every step" if self.memory_period == 1 else f"every {self.memory_period} steps"
        return (
            f"checkpoints: to memory {every} (the slices after the first keep the copies), to "
            f"the bucket every {self.bucket_period} steps"
        )


def plan_tier(tier: str, args: MaxTextArgs, num_slices: int | None, elastic: bool) -> MaxTextArgs:
    """MaxText's arguments for the tier; refuses what cannot work, with the fix."""
    given_memory = bool(args.get("enable_emergency_checkpoint"))
    if args.get("enable_multi_tier_checkpointing") or tier == MULTI_TIER:
        raise UsageError(
            "checkpoint_tier",
            f"multi-tier is not supported on a Ray cluster: {MULTI_TIER_REFUSAL}",
            "use --checkpoint_tier=memory (Orbax's in-memory copies on the slices' hosts, "
            "restored from the nearest) or bucket",
        )
    if tier not in TIERS:
        raise UsageError("checkpoint_tier", f"is {tier!r}", f"one of {', '.join(TIERS)}")
    if tier == BUCKET and not given_memory:
        return args
    if num_slices is not None and num_slices < 2:
        raise UsageError(
            "checkpoint_tier",
            "memory needs two slices or more: Orbax keeps the in-memory copies on the slices "
            "after the first (the first writes the bucket's), and on one slice its emergency "
            "checkpointing writes only to the bucket",
            "run on --num_slices=2 or more, or keep --checkpoint_tier=bucket",
        )
    if elastic:
        raise UsageError(
            "checkpoint_tier",
            "memory is not supported with --min_slices below --num_slices: Orbax's in-memory "
            "copies are one per slice of a fixed number of slices",
            "drop --min_slices, or keep --checkpoint_tier=bucket",
        )
    bucket_period = int(args.get("checkpoint_period"))
    default = max(1, bucket_period // DEFAULT_SAVES_PER_BUCKET_SAVE)
    local = int(args.get("local_checkpoint_period") or 0)
    if local <= 0:
        local = default
    if local >= bucket_period:
        raise UsageError(
            "local_checkpoint_period",
            f"is {local}, not fewer steps than checkpoint_period={bucket_period}: the memory "
            "tier would save no more often than the bucket",
            f"local_checkpoint_period={default}",
        )
    # Only what the job did not set: a local_checkpoint_period it gave was checked above.
    return args.with_defaults(enable_emergency_checkpoint=True, local_checkpoint_period=local)


def plan_continuous(mode: str, args: MaxTextArgs, preemptible: bool) -> MaxTextArgs:
    """MaxText's arguments for --continuous_checkpointing (`preemptible`: the slices' capacity
    is taken back with a notice); the job's own enable_continuous_checkpointing= wins."""
    if mode not in CONTINUOUS:
        raise UsageError(
            "continuous_checkpointing", f"is {mode!r}", f"one of {', '.join(CONTINUOUS)}"
        )
    memory = bool(args.get("enable_emergency_checkpoint"))
    if mode == "on" and memory:
        raise UsageError(
            "continuous_checkpointing",
            "is on with the memory tier, which saves every local_checkpoint_period steps and "
            "to the bucket at checkpoint_period already",
            "drop --continuous_checkpointing=on, or use it with --checkpoint_tier=bucket",
        )
    if mode == "off" or (mode == "auto" and (memory or not preemptible)):
        return args
    if args.get("max_num_checkpoints_to_keep") in (None, "None", 0, -1):
        args = args.with_defaults(max_num_checkpoints_to_keep=CONTINUOUS_KEPT)
    return args.with_defaults(enable_continuous_checkpointing=True)


def tier_plan(args: MaxTextArgs) -> TierPlan:
    """What MaxText's arguments (after plan_tier) ask of its checkpointing."""
    bucket_period = int(args.get("checkpoint_period"))
    if args.get("enable_emergency_checkpoint"):
        return TierPlan(MEMORY, int(args.get("local_checkpoint_period")), bucket_period)
    return TierPlan(BUCKET, None, bucket_period)
