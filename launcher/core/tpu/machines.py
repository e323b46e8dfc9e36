"""The machine types GKE's nodes are made of, and what a node of each reports: the TPU hosts of
the TPU table's generations and the CPU pool's machines (`gke plan` sizes the CPU pool from
them; the test control plane's fake GKE nodes report them)."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.tpu.table import GENERATIONS


@dataclass(frozen=True)
class Machine:
    """A GKE machine type's size, as its node reports capacity (the fake GKE nodes use it)."""

    vcpus: int
    memory_gib: int


# The TPU hosts of the TPU table plus the CPU pool the Ray head and Saxml's CPU servers land on.
MACHINES: dict[str, Machine] = {
    "ct4p-hightpu-4t": Machine(240, 407),
    "ct5lp-hightpu-1t": Machine(24, 48),
    "ct5lp-hightpu-4t": Machine(112, 192),
    "ct5lp-hightpu-8t": Machine(224, 384),
    "ct5p-hightpu-4t": Machine(208, 448),
    "ct6e-standard-1t": Machine(44, 176),
    "ct6e-standard-4t": Machine(180, 720),
    "ct6e-standard-8t": Machine(180, 1440),
    "tpu7x-standard-4t": Machine(224, 960),
    "e2-standard-4": Machine(4, 16),
    "n2-standard-4": Machine(4, 16),
    "n2-standard-8": Machine(8, 32),
    "n2-standard-16": Machine(16, 64),
    "n2-standard-32": Machine(32, 128),
}
CPU_POOL_MACHINE = "n2-standard-16"


def node_vcpus(machine: str) -> int:
    """The vCPUs a node of `machine` reports as `gke plan` makes its pool. Compute Engine's
    "Set the number of threads per core": with --threads-per-core=1 (the v6e tutorial's flag)
    "the number of vCPUs is halved" (ct6e-standard-4t: 180 -> 90)."""
    one_thread = any(
        machine in gen.machines.values() and "--threads-per-core=1" in gen.node_pool_flags
        for gen in GENERATIONS.values()
    )
    return MACHINES[machine].vcpus // 2 if one_thread else MACHINES[machine].vcpus
