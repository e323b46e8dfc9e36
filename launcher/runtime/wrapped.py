"""Wrapping a library's function for the life of a start, so that a second start in the same
process wraps the library's own function again (with that start's callbacks) instead of the
first start's wrapper, or keeping the first start's callbacks behind a guard."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_ORIGINAL = "_launcher_wraps"


def rewrap(owner: object, name: str, make: Callable[[Any], Any]) -> None:
    """`owner.name = make(original)`, where `original` is the attribute as the library has it,
    before any wrap of ours."""
    current = getattr(owner, name)
    original = getattr(current, _ORIGINAL, current)
    wrapper = make(original)
    setattr(wrapper, _ORIGINAL, original)
    setattr(owner, name, wrapper)
