"""Every test belongs to exactly one tier (a marker: what it needs to run); `make test-<tier>`
runs one, `make test` all. A test without its tier would silently fall out of every tier run.

`make test` runs on two pytest-xdist workers with `TierScheduling`: a tier that owns one shared
thing runs whole, in order, on one worker: e2e (the local Ray cluster, reshaped in turn), cluster
(the test control plane), preflight (its compiles, which a test counts by process) and node (its
node and its releases). The e2e
tier, the long one, starts first; the other three next, on the other worker, so that none is
left for the e2e tier's worker to pick up at its end; the rest follow, a module at a time. The
other worker yields the CPU to the e2e tier (nice 19, its child processes too): it has minutes of
slack where the e2e tier has none."""

from __future__ import annotations

import os

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

from launcher.client.local.instance import RAY_TMPDIR, SLOT_ENV, LocalInstance

# The suite's own local Ray cluster, beside any a user started (`make demo`: slot 0): slot 1 has
# its own ports and Ray state directory, so the tests neither adopt nor stop the user's cluster;
# and its own job state, so the user's last submission and job logs stay theirs. Set before any
# test module imports the launcher, in the controller and in every worker (and so in every
# command a test runs).
TEST_SLOT = LocalInstance(1)
os.environ[SLOT_ENV] = str(TEST_SLOT.slot)
os.environ[RAY_TMPDIR] = TEST_SLOT.tmp_root
os.environ["LAUNCHER_STATE_DIR"] = f"{TEST_SLOT.tmp_root}/launcher-state"

TIERS = ("unit", "chart", "cluster", "e2e", "preflight", "image", "node")
# The tiers whose tests share one session-wide thing (each in tests/<tier>/), in the order they
# start: the first is the critical path.
WHOLE_ON_ONE_WORKER = ("e2e", "cluster", "preflight", "node")


# Ray runs its workers at nice 15: the other worker at 19 leaves the e2e jobs most of a core
# they share (nice weights 36 to 15) where at nice 0 it took nearly all of it (1024 to 36).
YIELDING_NICE = 19
HAS_E2E = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under `make test` (xdist workers), a worker running anything but the e2e tier while the
    session has one yields the CPU to it, before the test's fixtures start their processes."""
    beside_e2e = item.config.stash.get(HAS_E2E, False) and not item.get_closest_marker("e2e")
    if beside_e2e and os.environ.get("PYTEST_XDIST_WORKER") and os.nice(0) < YIELDING_NICE:
        os.nice(YIELDING_NICE - os.nice(0))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[HAS_E2E] = any(item.get_closest_marker("e2e") for item in items)
    for item in items:
        tiers = [t for t in TIERS if item.get_closest_marker(t)]
        if len(tiers) != 1:
            raise pytest.UsageError(
                f"{item.nodeid} is marked {tiers or 'with no tier'}: give it exactly one of "
                f"{', '.join(TIERS)} (pytestmark = pytest.mark.<tier>)"
            )
        if tiers[0] in WHOLE_ON_ONE_WORKER and _whole_tier(item.nodeid) != f"tests/{tiers[0]}":
            raise pytest.UsageError(
                f"{item.nodeid} is a {tiers[0]} test outside tests/{tiers[0]}: under `make test` "
                f"it would run beside its tier on the other worker; move it to tests/{tiers[0]}/"
            )


def _whole_tier(nodeid: str) -> str | None:
    """The directory of a shared tier the test is in (its scope), or None."""
    dirs = (f"tests/{tier}" for tier in WHOLE_ON_ONE_WORKER)
    return next((d for d in dirs if nodeid.startswith(d + "/")), None)


class TierScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a tier as one scope where the tier shares something, else a
    module. (`--dist loadgroup` would say the same with marks, but xdist 3.8 carries the group in
    `item._nodeid`, which pytest 9 no longer reads back: groups were split across workers.)"""

    def _split_scope(self, nodeid: str) -> str:
        return _whole_tier(nodeid) or nodeid.split("::", 1)[0]

    def _assign_work_unit(self, node: WorkerController) -> None:
        # The critical path first (whichever worker asks first gets the e2e tier), then the
        # other long tiers.
        for tier in reversed(WHOLE_ON_ONE_WORKER):
            if f"tests/{tier}" in self.workqueue:
                self.workqueue.move_to_end(f"tests/{tier}", last=False)
        super()._assign_work_unit(node)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> TierScheduling:
    # Any distributed run (`-n N`, whatever `--dist` says): the tiers need their worker to pass.
    return TierScheduling(config, log)
