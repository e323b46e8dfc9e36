"""User errors: what was wrong, where, and how to fix it, visible from Kubernetes too."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

# MaxText exits 2 on config errors; we do the same so a bad config is never mistaken for a crash.
CONFIG_ERROR_EXIT_CODE = 2
TERMINATION_LOG = "/dev/termination-log"


@dataclass
class UsageError(Exception):
    """A mistake in the user's input. Never shown with a traceback."""

    field: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}.\n  fix: {self.fix}"


def exit_with(error: UsageError, prog: str = "launcher") -> None:
    """Prints the error, records it where kubelet reads termination messages, and exits 2."""
    message = f"{prog}: error: {error}"
    print(message, file=sys.stderr, flush=True)
    if os.path.exists(TERMINATION_LOG) and os.access(TERMINATION_LOG, os.W_OK):
        with open(TERMINATION_LOG, "w") as f:
            f.write(message + "\n")
    raise SystemExit(CONFIG_ERROR_EXIT_CODE)
