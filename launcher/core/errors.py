"""The errors library code raises. Only entry points turn them into exit codes (`report`),
so a caller such as `up` can clean up after a failed step before the process ends."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

# MaxText exits 2 on config errors; we do the same so a bad config is never mistaken for a crash.
CONFIG_ERROR_EXIT_CODE = 2
# The shell's code for "command not found".
NOT_FOUND_EXIT_CODE = 127
TERMINATION_LOG = "/dev/termination-log"


@dataclass
class UsageError(Exception):
    """A mistake in the user's input: what was wrong, where, and how to fix it. Never shown with
    a traceback."""

    field: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}.\n  fix: {self.fix}"


# Where each outside command the launcher runs comes from, said when it is missing.
INSTALL_HINTS = {
    "helm": "Helm 3.22 or later, or 4 (helm.sh/docs/intro/install); in a clone `make helm` "
    "puts the pinned one in .tools/",
    "kubectl": "`gcloud components install kubectl`, or kubernetes.io/docs/tasks/tools",
    "gcloud": "the Google Cloud CLI (cloud.google.com/sdk/docs/install), logged in with "
    "`gcloud auth login`",
}


@dataclass
class CommandError(Exception):
    """An external command (ray, kubectl, helm) that failed or is not installed."""

    step: str
    argv: Sequence[str]
    returncode: int
    output: str = field(default="", repr=False)

    def __str__(self) -> str:
        if self.returncode == NOT_FOUND_EXIT_CODE:
            tool = os.path.basename(self.argv[0])
            how = INSTALL_HINTS.get(tool, "install it, or put it on PATH")
            if tool == "ray":  # this package's own extra, from where this client came
                from launcher.core.package_version import pip_install

                how = (
                    f"the runtime extra: {pip_install('runtime')} (Linux x86_64); in a clone "
                    "`make venv` puts it in .venv/bin"
                )
            return f"{self.step}: `{self.argv[0]}` is not installed or not on PATH ({how})"
        shown = shlex.join(self.argv)
        tail = "\n".join(self.output.strip().splitlines()[-20:])
        return (
            f"{self.step} failed (exit {self.returncode}): {shown}"
            + (f"\n{tail}" if tail else "")
            + self.hint()
        )

    def hint(self) -> str:
        """The fix for a failure whose cause the tool's own words name (none: "")."""
        tool = os.path.basename(self.argv[0]) if self.argv else ""
        if tool in ("kubectl", "helm") and any(s in self.output for s in _NO_CLUSTER):
            return (
                f"\n  fix: {tool} reaches no cluster: get its credentials first "
                "(`gcloud container clusters get-credentials CLUSTER --location LOCATION`), "
                "or pick the context (`kubectl config use-context NAME`)"
            )
        return ""


# What kubectl and helm say when no kubeconfig names a reachable cluster (an empty kubeconfig
# falls back to localhost:8080; a cluster that is gone or a context that is not set).
_NO_CLUSTER = (
    "localhost:8080",
    "Unable to connect to the server",
    "Kubernetes cluster unreachable",
    "current-context is not set",
)


def report(error: UsageError | CommandError, prog: str) -> int:
    """Prints the error (and records a usage error where kubelet reads termination messages);
    returns the exit code the entry point should end with."""
    message = f"{prog}: error: {error}"
    print(message, file=sys.stderr, flush=True)
    if isinstance(error, CommandError):
        return error.returncode or 1
    if os.path.exists(TERMINATION_LOG) and os.access(TERMINATION_LOG, os.W_OK):
        with open(TERMINATION_LOG, "w") as f:
            f.write(message + "\n")
    return CONFIG_ERROR_EXIT_CODE
