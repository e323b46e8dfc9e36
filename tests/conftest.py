"""Every test belongs to exactly one tier (a marker: what it needs to run); `make test-<tier>`
runs one, `make test` all. A test without its tier would silently fall out of every tier run.

`make test` runs on two pytest-xdist workers (`--dist loadgroup`): the tiers that own one shared
thing run whole on one worker, in order: e2e (the local Ray cluster, reshaped in turn), cluster
(the test control plane) and preflight (its compiles, which a test counts by process). The rest
spread over both. The e2e tier is the long one; the others are done well before its last, most
load-sensitive module (elastic slices) starts."""

from __future__ import annotations

import pytest

TIERS = ("unit", "chart", "cluster", "e2e", "preflight", "image")
# Tiers whose tests share one session-wide thing: each runs whole on one xdist worker.
ONE_WORKER = ("e2e", "cluster", "preflight")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tiers = [t for t in TIERS if item.get_closest_marker(t)]
        if len(tiers) != 1:
            raise pytest.UsageError(
                f"{item.nodeid} is marked {tiers or 'with no tier'}: give it exactly one of "
                f"{', '.join(TIERS)} (pytestmark = pytest.mark.<tier>)"
            )
        if tiers[0] in ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(tiers[0]))
