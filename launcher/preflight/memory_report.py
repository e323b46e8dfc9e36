"""Per-device memory of one training step against the device's HBM: the report preflight
prints and the refusal it ends with when the job does not fit. A device is a chip, but on tpu7x
half of one (each TensorCore is a JAX device with half the chip's HBM): there the report says
"device" and adds the chip's figures."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.errors import UsageError
from launcher.core.tpu.table import device_noun

GIB = 1024**3


@dataclass
class MemoryReport:
    """Per-device memory of one training step, as XLA's ahead-of-time compile reports it."""

    target: str
    hbm_gib: float  # per device
    arguments_gib: float  # parameters + optimizer state (+ the batch)
    outputs_gib: float
    aliased_gib: float  # outputs that reuse argument buffers (donated state)
    temporaries_gib: float  # activations, gradients, scratch
    compile_seconds: float
    fits: bool
    note: str = ""
    # For the sharding advice (hlo_traffic): per device, one step, loop bodies per iteration.
    flops: float = 0.0  # MaxText's analytic training FLOPs (XLA's count sees one layer)
    remat_flops: float = 0.0  # what the remat policy computes again (see remat_costs)
    hbm_bytes: float = 0.0
    ici_bytes: float = 0.0
    dcn_bytes: float = 0.0  # between slices, on several
    model_dims: dict | None = None  # remat_costs.ModelDims of the compiled job
    devices_per_chip: int = 1

    @property
    def per(self) -> str:
        return device_noun(self.devices_per_chip)

    @property
    def total_gib(self) -> float:
        return self.arguments_gib + self.outputs_gib + self.temporaries_gib - self.aliased_gib

    @property
    def margin_gib(self) -> float:
        return self.hbm_gib - self.total_gib

    def render(self) -> str:
        if self.note.startswith("XLA:"):  # the compiler stopped: it reports only the overflow
            return (
                f"preflight: one training step on {self.target} needs "
                f"{self.temporaries_gib:.2f} GiB of temporaries alone per {self.per}; a "
                f"{self.per} has "
                f"{self.hbm_gib:g} GiB (XLA ahead-of-time compile, "
                f"{self.compile_seconds:.0f}s)\n  verdict: DOES NOT FIT ({self.note})"
            )
        rows = [
            ("parameters + optimizer state", self.arguments_gib),
            ("temporaries (activations, gradients)", self.temporaries_gib),
            ("outputs not aliased to inputs", self.outputs_gib - self.aliased_gib),
            ("total", self.total_gib),
            (f"HBM per {self.per} ({self.target})", self.hbm_gib),
            ("margin", self.margin_gib),
        ]
        if self.devices_per_chip > 1:
            n = self.devices_per_chip
            rows += [
                (f"total per chip ({n} devices)", self.total_gib * n),
                ("HBM per chip", self.hbm_gib * n),
            ]
        lines = [
            f"preflight: per-{self.per} memory of one training step on {self.target} "
            f"(XLA ahead-of-time compile, {self.compile_seconds:.0f}s):"
        ]
        lines += [f"  {name:<40} {gib:8.2f} GiB" for name, gib in rows]
        lines.append(
            f"  verdict: {'fits' if self.fits else 'DOES NOT FIT'}"
            + (f" ({self.note})" if self.note else "")
        )
        return "\n".join(lines)


def refuse_if_too_big(report: MemoryReport) -> None:
    if report.fits:
        return
    short = (
        f"needs at least {report.total_gib:.1f} GiB per {report.per}"
        if report.total_gib
        else "does not fit"
    )
    raise UsageError(
        "per_device_batch_size",
        f"the job {short} but a {report.target} {report.per} has {report.hbm_gib:g} GiB of HBM",
        "lower per_device_batch_size (or max_target_length); recompute activations with "
        "remat_policy=full; shard parameters and optimizer state wider with more "
        "ici_fsdp_parallelism (and less ici_tensor/data); or choose a larger slice",
    )
