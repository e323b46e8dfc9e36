"""What kind of value each MaxText config key takes, read from MaxText's own declarations
(`maxtext/configs/types.py`, the pydantic model MaxText validates its config with) without
importing it (that would import JAX: seconds on every workstation command). A value of the
wrong kind is then refused before submit, with its key, instead of on every host at start."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

# The annotations whose values are checked; a key with any other part (str, paths, lists,
# enums) is left to MaxText.
_INTS = {"int", "NonNegativeInt", "PositiveInt"}
_FLOATS = {"float", "NonNegativeFloat"}
_SIMPLE = _INTS | _FLOATS | {"bool", "None"}


@dataclass(frozen=True)
class ValueKind:
    parts: frozenset[str]  # int, float, bool, None and the pydantic constrained names
    choices: tuple[str, ...] = ()  # a Literal's strings

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        names = []
        bound = ""
        if self.parts & {"NonNegativeInt", "NonNegativeFloat"}:
            bound = " >= 0"
        elif "PositiveInt" in self.parts:
            bound = " > 0"
        if self.parts & _INTS and not self.parts & _FLOATS:
            names.append("a whole number" + bound)
        if self.parts & _FLOATS:
            names.append("a number" + bound)
        if "bool" in self.parts:
            names.append("true or false")
        if "None" in self.parts:
            names.append("null")
        return " or ".join(names)

    def accepts(self, raw: str) -> bool:
        if self.choices:
            return raw in self.choices or ("None" in self.parts and raw in ("None", "null"))
        value = typed(raw)
        if value is None:
            return "None" in self.parts
        if isinstance(value, bool):
            return "bool" in self.parts
        number = _number(raw)
        if number is None:
            return False
        # A whole number where only whole numbers go (1.5 and 2.0 are not steps).
        ok = bool(self.parts & _FLOATS) or isinstance(value, int)
        if self.parts & {"NonNegativeInt", "NonNegativeFloat"}:
            ok = ok and number >= 0
        if "PositiveInt" in self.parts:
            ok = ok and number > 0
        return ok


def typed(raw: str) -> Any:
    """A command-line value as MaxText's YAML parser types it ("4" -> 4, "true" -> True)."""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def _number(raw: str) -> float | None:
    try:
        value = float(raw.replace("_", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _kind(annotation: ast.expr) -> ValueKind | None:
    """The kind an annotation declares, or None when it is not one checked here."""
    text = ast.unparse(annotation)
    if text.startswith("Optional[") and text.endswith("]"):
        text = text[len("Optional[") : -1] + " | None"
    parts, choices = set(), ()
    for part in (p.strip() for p in text.split("|")):
        if part.startswith("Literal[") and part.endswith("]"):
            values = ast.literal_eval(f"({part[len('Literal[') : -1]},)")
            if not all(isinstance(v, str) for v in values):
                return None
            choices = tuple(values)
        elif part in _SIMPLE:
            parts.add(part)
        else:
            return None
    if choices and parts - {"None"}:
        return None
    return ValueKind(frozenset(parts), choices)


@cache
def value_kinds(types_py: Path) -> dict[str, ValueKind]:
    """key -> the kind of value it takes, for every key MaxText's types.py declares plainly."""
    kinds: dict[str, ValueKind] = {}
    for node in ast.walk(ast.parse(types_py.read_text())):
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                kind = _kind(statement.annotation)
                if kind is not None:
                    kinds[statement.target.id] = kind
    return kinds
