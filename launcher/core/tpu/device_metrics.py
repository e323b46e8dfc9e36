"""What the TPU chips themselves did, per host, and what it says about a job: the facts of GKE's
TPU device plugin and of Ray's agent that scrapes it, and the straggler and idle verdicts.

GKE's TPU device plugin serves Prometheus text on each TPU node (`:2112/metrics`); the KubeRay
TPU webhook names it to each Ray TPU pod (TPU_DEVICE_PLUGIN_ADDR), and Ray's reporter agent
scrapes it every 5 s and exports its figures as `ray_tpu_*` beside Ray's own
(ray/dashboard/modules/reporter/reporter_agent.py, `_get_tpu_usage`; ray PR #53678). The
plugin's series carry `accelerator_id` (`<id>-<chip>`), `make` (`cloud-tpu`), `model` (the GKE
accelerator, `tpu-v6e-slice`) and `tpu_topology`; TensorCore and HBM-bandwidth utilization are
indexed by the host's chip, duty cycle and memory by the chip's index in the slice (the agent
maps one onto the other). The local cluster's stand-in serves the same text.

On TPU a chip waiting in a collective is executing it: a host whose chips idle while the others
work is not feeding them (a straggler: its input pipeline, its CPU, a stuck process), and every
host idle while no step finishes is a hang in host code.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

DEVICE_PLUGIN_ADDR_ENV = "TPU_DEVICE_PLUGIN_ADDR"  # host:port, as the webhook sets it
DEVICE_PLUGIN_PORT = 2112  # GKE's TPU device plugin's metrics port on each TPU node

# The device plugin's metric names (per chip), and Ray's name for each once its agent exports it.
DUTY_CYCLE = "duty_cycle"  # % of the interval the chip was executing
TENSORCORE_UTILIZATION = "tensorcore_utilization"  # % of the TensorCores' peak
MEMORY_BANDWIDTH_UTILIZATION = "memory_bandwidth_utilization"  # % of HBM bandwidth
MEMORY_USED = "memory_used"  # HBM bytes in use
MEMORY_TOTAL = "memory_total"  # HBM bytes
# Indexed by the host's chip; the plugin's other series by the chip's index in the slice.
HOST_INDEXED = (TENSORCORE_UTILIZATION, MEMORY_BANDWIDTH_UTILIZATION)
RAY_NAMES = {
    name: f"ray_tpu_{name}"
    for name in (DUTY_CYCLE, TENSORCORE_UTILIZATION, MEMORY_BANDWIDTH_UTILIZATION)
} | {MEMORY_USED: "ray_tpu_memory_used", MEMORY_TOTAL: "ray_tpu_memory_total"}
RAY_CHIP_LABEL = "TpuIndex"  # the agent's label for the chip (host-local after its mapping)

# A chip under this duty cycle is idle; a host whose mean is under STRAGGLER_SHARE of the other
# hosts' median, while that median is at least BUSY, is a straggler.
IDLE_PCT = 5.0
BUSY_PCT = 20.0
STRAGGLER_SHARE = 0.25

OK, STRAGGLER, IDLE = "ok", "straggler", "idle"


@dataclass(frozen=True)
class HostDevices:
    """One TPU host's chips, as its agent last exported them."""

    host: str  # `<slice>/<worker id>`, as Ray's labels name the host
    chips: int
    duty_cycle: float  # mean over its chips, %
    tensorcore_utilization: float  # mean, %
    memory_used: float  # bytes, all its chips
    memory_total: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    kind: str  # OK, STRAGGLER or IDLE
    hosts: tuple[str, ...] = ()  # the stragglers

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.kind, "hosts": list(self.hosts)}


def judge(hosts: list[HostDevices], steps_stalled: bool) -> Verdict:
    """IDLE: every host's chips idle while no step finishes; STRAGGLER: some hosts' chips idle
    while the others' work; else OK (one host: never a straggler)."""
    if not hosts:
        return Verdict(OK)
    if all(h.duty_cycle < IDLE_PCT for h in hosts):
        return Verdict(IDLE if steps_stalled else OK)
    if len(hosts) < 2:
        return Verdict(OK)
    slow = []
    for h in hosts:
        others = statistics.median(o.duty_cycle for o in hosts if o is not h)
        if others >= BUSY_PCT and h.duty_cycle < STRAGGLER_SHARE * others:
            slow.append(h.host)
    return Verdict(STRAGGLER, tuple(slow)) if slow else Verdict(OK)


def describe(verdict: Verdict, hosts: list[HostDevices]) -> str:
    """The `[devices]` line's text: the verdict in words, then each host's duty cycle."""
    by_host = ", ".join(f"{h.host} {h.duty_cycle:.0f}%" for h in hosts)
    if verdict.kind == STRAGGLER:
        slow = set(verdict.hosts)
        busy = statistics.median(h.duty_cycle for h in hosts if h.host not in slow)
        head = (
            f"straggler: {', '.join(verdict.hosts)} (its chips idle while the other hosts' run "
            f"at {busy:.0f}%: its input, CPU or process holds the slice back)"
        )
    elif verdict.kind == IDLE:
        head = (
            "idle: every host's chips idle while no step finishes (a hang in host code, or a "
            "collective some host never reached)"
        )
    else:
        head = "ok: no host's chips idle while the others work"
    return f"{head}; duty cycle by host: {by_host}"
