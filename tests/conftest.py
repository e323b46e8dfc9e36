"""Every test belongs to exactly one tier (a marker: what it needs to run); `make test-<tier>`
runs one, `make test` all. A test without its tier would silently fall out of every tier run."""

from __future__ import annotations

import pytest

TIERS = ("unit", "chart", "cluster", "e2e", "preflight", "image")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tiers = [t for t in TIERS if item.get_closest_marker(t)]
        if len(tiers) != 1:
            raise pytest.UsageError(
                f"{item.nodeid} is marked {tiers or 'with no tier'}: give it exactly one of "
                f"{', '.join(TIERS)} (pytestmark = pytest.mark.<tier>)"
            )
