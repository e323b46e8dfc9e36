"""Kubernetes quantities (`200G`, `64Gi`, `500m`) as numbers: CPUs, or GiB of memory."""

from __future__ import annotations

# Binary suffixes first: "Gi" must not be read as "G" and an "i" left over.
_UNITS = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
}


def quantity(value: str | int | float | None, memory: bool) -> float:
    """A Kubernetes quantity as CPUs or, with `memory`, GiB (None: 0)."""
    if value is None:
        return 0.0
    text = str(value)
    for suffix, factor in _UNITS.items():
        if text.endswith(suffix):
            number = float(text[: -len(suffix)]) * factor
            return number / 2**30 if memory else number
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    return float(text) / 2**30 if memory else float(text)
