"""Children that end with their parent: a compile the launcher started must not go on using a
core for minutes after the launcher was killed, nor a launcher a test started after the test
(a test's time limit, `kill -9`, a closed terminal). Linux's parent-death signal does it
whatever way the parent ends; elsewhere the command runs unchanged.

The signal is set by this module run as a trampoline between the fork and the command's exec
(`subprocess`' `preexec_fn` is not safe beside threads, and preflight compiles from a pool of
them). It belongs to the thread that started the child: start it from one that outlives it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def ends_with_this_process(argv: Sequence[str]) -> list[str]:
    """`argv`, to run so that it gets SIGKILL when this process ends. Only the command itself:
    what it starts in turn (Ray's daemons from `ray start`) does not inherit the signal."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [sys.executable, "-m", __name__, str(os.getpid()), *argv]


def _trampoline(parent: str, *argv: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):  # the parent ended before the signal was set
        os._exit(1)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    _trampoline(*sys.argv[1:])
