"""Children that end with their parent: a compile the launcher started must not go on using a
core for minutes after the launcher was killed (a test's time limit, `kill -9`, a closed
terminal). Linux's parent-death signal does it whatever way the parent ends; elsewhere the
child's own check at start is all there is."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_PID_ENV = "LAUNCHER_PARENT_PID"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def child_env() -> dict[str, str]:
    """What to add to a child's environment so that `die_with_parent` knows its parent."""
    return {PARENT_PID_ENV: str(os.getpid())}


def die_with_parent() -> None:
    """Called first thing in a child: SIGKILL when the parent ends, and exit now if it already
    has (it may end before this runs)."""
    parent = os.environ.get(PARENT_PID_ENV)
    if not parent:
        return
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):
        os._exit(1)
