"""The `[progress]` line: written by rank 0 in the job for every step, read by `submit` on the
workstation for its live display. One format, both directions, here."""

from __future__ import annotations

import re

PROGRESS_LINE = re.compile(
    r"\[progress\] step (?P<step>\d+)/(?P<total>\d+) loss (?P<loss>\S+) step time "
    r"(?P<seconds>\S+)s tokens/s/device (?P<tokens>\S+)(?: TFLOP/s/device (?P<tflops>\S+))?"
    r"(?: MFU (?P<mfu>\S+))?(?: ETA (?P<eta>\S+?)s?)?$"
)


def format_progress_line(
    step: int,
    total: int,
    loss: float,
    seconds: float,
    tokens_per_device: float,
    tflops_per_device: float,
    mfu: float | None,
    eta_seconds: float,
) -> str:
    """`step` counts from 1; `mfu` is a fraction, None where the chip's peak is unknown."""
    shown_mfu = f" MFU {mfu:.1%}" if mfu is not None else ""
    return (
        f"[progress] step {step}/{total} loss {loss:.4f} step time {seconds:.3f}s "
        f"tokens/s/device {tokens_per_device:.0f} TFLOP/s/device {tflops_per_device:.3f}"
        f"{shown_mfu} ETA {eta_seconds:.0f}s"
    )
