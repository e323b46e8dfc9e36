"""Everything the runtime borrows from a library's private surface or patches, one module per
library (ray, maxtext, orbax, jax, torch), each read from one version that its library's pin
in pyproject.toml names, none of it promised by the library to stay.

A library upgrade that moves or renames one of these fails tests/unit/test_borrowed.py on a
workstation (it imports every symbol of every table and checks the installed versions), not
on a TPU slice mid-restart. Nothing here imports a library until it is called: the torch
backends are not in the JAX image, nor Ray on a workstation. Two ways to patch, both here:
`patch` for the life of a start (a second start wraps the library's own function again, not the
first start's wrapper) and `patching`, undone when its block ends."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Borrowed:
    """What one library lends the runtime: `symbols` maps (module, name) to why it is used (a
    name may be dotted: a class's attribute); `patched` those the launcher replaces."""

    distribution: str  # the library's name on PyPI, whose installed version the test reads
    version_read: str
    symbols: dict[tuple[str, str], str]
    patched: frozenset[tuple[str, str]] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if unlisted := self.patched - set(self.symbols):
            raise ValueError(f"{self.distribution}: patched but not borrowed: {sorted(unlisted)}")

    def take(self, module: str, name: str) -> Any:
        """One symbol of the table, imported now."""
        if (module, name) not in self.symbols:
            raise KeyError(
                f"{module}.{name} is not in launcher.runtime.borrowed.{self.file}'s table: "
                "list it there first"
            )
        return self._resolve(module, name)

    def _resolve(self, module: str, name: str) -> Any:
        try:
            found: Any = importlib.import_module(module)
            for part in name.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError) as e:
            raise ImportError(
                f"{module}.{name}, read from {self.distribution} {self.version_read}, is gone "
                f"from this {self.distribution} ({e}): launcher/runtime/borrowed/{self.file}.py "
                "needs reading against it"
            ) from e
        return found

    def owner(self, module: str, name: str) -> tuple[Any, str]:
        """Where a patched symbol lives: its module (or a dotted name's class), and its name."""
        if (module, name) not in self.patched:
            raise KeyError(
                f"{module}.{name} is not among launcher.runtime.borrowed.{self.file}'s patched "
                "symbols: list it there first"
            )
        owner, _, attr = name.rpartition(".")
        return (self._resolve(module, owner) if owner else importlib.import_module(module)), attr

    def patch(self, module: str, name: str, make: Callable[[Any], Any]) -> None:
        """`module.name = make(the library's own)` for the life of this start."""
        rewrap(*self.owner(module, name), make)

    @contextlib.contextmanager
    def patching(self, module: str, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
        """`module.name = make(what it is now)` while inside; as it was after."""
        owner, attr = self.owner(module, name)
        original = getattr(owner, attr)
        setattr(owner, attr, make(original))
        try:
            yield
        finally:
            setattr(owner, attr, original)

    @property
    def file(self) -> str:
        return {"orbax-checkpoint": "orbax"}.get(self.distribution, self.distribution)
