"""launcher.core.extras, the one table of which extra brings which module, against
pyproject.toml's extras and the distributions installed here (this checkout's environment has
every extra): each extra's own requirements have a module in its row, and each module of a row
comes with that extra. A missing module's message names the extra that installs it."""

from __future__ import annotations

import contextlib
import importlib.metadata as metadata
import re
import tomllib

import pytest

from harness.paths import REPO
from launcher.core.extras import EXTRAS, extra_of, missing

pytestmark = pytest.mark.unit

EXTRA_REQUIREMENTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
    "optional-dependencies"
]
SELF = "tpu-launcher"


def _name(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert found, requirement
    return found.group(0).lower().replace("_", "-")


def _brought(extra: str) -> set[str]:
    """Every distribution `extra` installs: its requirements and theirs (markers read loosely:
    a requirement under any marker counts)."""
    todo = [_name(r) for r in EXTRA_REQUIREMENTS[extra]]
    todo += [x for r in EXTRA_REQUIREMENTS[extra] if _name(r) == SELF for x in _self_extras(r)]
    seen: set[str] = set()
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        if dist in EXTRA_REQUIREMENTS:  # tpu-launcher[other]: that extra's
            todo += [_name(r) for r in EXTRA_REQUIREMENTS[dist]]
            continue
        with contextlib.suppress(metadata.PackageNotFoundError):  # not installed: no deeper
            todo += [_name(r) for r in metadata.requires(dist) or []]
    return seen


def _self_extras(requirement: str) -> list[str]:
    inside = re.search(r"\[([^\]]*)\]", requirement)
    return [e.strip() for e in inside.group(1).split(",")] if inside else []


MODULES_OF: dict[str, set[str]] = {}
for module, dists in metadata.packages_distributions().items():
    for dist in dists:
        MODULES_OF.setdefault(dist.lower().replace("_", "-"), set()).add(module)


@pytest.mark.parametrize("extra", EXTRAS, ids=lambda e: e.name)
def test_each_extras_own_requirements_have_a_module_in_its_row(extra):
    assert extra.name in EXTRA_REQUIREMENTS, f"{extra.name}: no such extra in pyproject.toml"
    for requirement in EXTRA_REQUIREMENTS[extra.name]:
        if (dist := _name(requirement)) != SELF:
            assert MODULES_OF.get(dist, set()) & extra.modules, (extra.name, dist)


@pytest.mark.parametrize("extra", EXTRAS, ids=lambda e: e.name)
def test_each_module_of_a_row_comes_with_that_extra(extra):
    brought = _brought(extra.name)
    for module in extra.modules:
        dists = {d.lower().replace("_", "-") for d in metadata.packages_distributions()[module]}
        assert dists & brought, f"{module} ({sorted(dists)}) is not installed by {extra.name}"


def test_a_missing_module_names_the_extra_that_installs_it():
    prepare = missing("pyarrow.parquet", "tpu-launcher data prepare")
    assert prepare is not None and "[data]'" in str(prepare) and "[gcs]'" in str(prepare)
    # Elsewhere a data module missing means the training stack, which brings it: one install.
    preflight = missing("numpy", "tpu-launcher preflight")
    assert preflight is not None and "[preflight]'" in str(preflight)
    assert "[data]'" not in str(preflight) and "in the launcher image" in str(preflight)
    submit = missing("jax", "tpu-launcher submit")
    assert submit is not None and "--skip-preflight" in str(submit)
    up = missing("ray", "tpu-launcher up")
    assert up is not None and "[runtime]'" in str(up)
    gcs = missing("google.cloud.storage", "tpu-launcher list")
    assert gcs is not None and "[gcs]'" in str(gcs)
    assert extra_of("yaml") is None and missing("no_such_module", "tpu-launcher up") is None
