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
        number = number_of(raw)
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


def number_of(raw: str) -> float | None:
    """A command-line value as a finite number, or None when it is not one."""
    try:
        value = float(raw.replace("_", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _kind(annotation: ast.expr, named: dict[str, tuple[str, ...]]) -> ValueKind | None:
    """The kind an annotation declares, or None when it is not one checked here. `named`: the
    module's string choices by name (a `Name = Literal[...]` alias, a `class Name(str, Enum)`)."""
    text = ast.unparse(annotation)
    if text.startswith("Optional[") and text.endswith("]"):
        text = text[len("Optional[") : -1] + " | None"
    parts: set[str] = set()
    choices: tuple[str, ...] = ()
    for part in (p.strip() for p in text.split("|")):
        if part.startswith("Literal[") and part.endswith("]"):
            values = ast.literal_eval(f"({part[len('Literal[') : -1]},)")
            if not all(isinstance(v, str) for v in values):
                return None
            choices = tuple(values)
        elif part in named:
            choices = named[part]
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
    module = ast.parse(types_py.read_text())
    named = _named_choices(module)
    kinds: dict[str, ValueKind] = {}
    for node in ast.walk(module):
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                kind = _kind(statement.annotation, named)
                if kind is not None:
                    kinds[statement.target.id] = kind
    return kinds


def _named_choices(module: ast.Module) -> dict[str, tuple[str, ...]]:
    """The string choices the module names: `ModelName = Literal["default", ...]` and
    `class DatasetType(str, Enum): GRAIN = "grain"` (model_name=, dataset_type=)."""
    named: dict[str, tuple[str, ...]] = {}
    for node in module.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Subscript)
            and ast.unparse(node.value.value) == "Literal"
        ):
            found = ast.literal_eval(node.value.slice)
            values = found if isinstance(found, tuple) else (found,)
            if all(isinstance(v, str) for v in values):
                named[node.targets[0].id] = tuple(values)
        elif isinstance(node, ast.ClassDef) and {ast.unparse(b) for b in node.bases} == {
            "str",
            "Enum",
        }:
            values = tuple(
                s.value.value
                for s in node.body
                if isinstance(s, ast.Assign)
                and isinstance(s.value, ast.Constant)
                and isinstance(s.value.value, str)
            )
            if values:
                named[node.name] = values
    return named
