"""A real local Ray cluster (head + simulated TPU hosts) driven through `tpu-launcher`, as a
user drives it, for the end-to-end tests."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.paths import REPO
from launcher.client.local.instance import local_instance
from launcher.core.child_process import ends_with_this_process
from launcher.core.job.events import EventKind, events, last_result


def tpu_launcher(
    *args: str,
    cwd: Path = REPO,
    env: dict[str, str] | None = None,
    check: bool = False,
    timeout: float | None = None,
    module: str = "launcher",
) -> subprocess.CompletedProcess:
    """`tpu-launcher ARGS` as a user runs it (this Python's launcher), its output captured and
    no terminal to ask on; killed with the test's process (a time limit's hard exit, kill -9).
    module=RUNTIME_MODULE: the cluster's own command instead, as a pod or a job runs it."""
    return subprocess.run(
        ends_with_this_process([sys.executable, "-m", module, *args]),
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        check=check,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def local_cluster_command(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return tpu_launcher(*args, check=check)


def require_local_cluster() -> None:
    """For the benchmarks, which use a running local cluster: exit with the fix if none."""
    if local_cluster_command("local", "status", check=False).returncode:
        raise SystemExit("start the local cluster first: tpu-launcher up")


@dataclass
class LocalCluster:
    bucket: Path
    started_here: bool

    def submit(
        self, *job_args: str, extra: tuple[str, ...] = (), timeout: int = 540, cwd: Path = REPO
    ):
        """Submits as `tpu-launcher submit` does, from `cwd` (what ships with the job);
        returns (exit code, output)."""
        # From a directory of its own (a user's project), a job names the cluster it goes to:
        # submit refuses a local cluster `up` started from another directory.
        named = [] if cwd == REPO else ["--address", local_instance().dashboard_address]
        argv = ["submit", *named, *extra, "--", *job_args]
        if not self.started_here:  # someone else's cluster: keep our checkpoints in our bucket
            # A PyTorch job's words after its script are the script's: it has no such key, and
            # writes to the bucket of the cluster's hosts.
            assert "torch" not in extra, (
                "a PyTorch job on a local cluster the tests did not start would write to that "
                "cluster's bucket, not the test's: stop it (tpu-launcher down, from the "
                "directory that started it) and let the tests start their own"
            )
            argv.append(f"base_output_directory={self.bucket}")
        return self._run(argv, timeout, cwd)

    def about_run(self, command: str, run: str, *options: str, timeout: int = 540):
        """`generate` or `export` through the same code path as `tpu-launcher generate|export`;
        (exit code, output). MaxText keys go in `options` after "--". The limit bounds a hang,
        as submit's does: a generate beside preflight's compiles in CI took over 300 s (its
        hosts load the run's tokenizer, the dataset's, since the run trains on the corpus)."""
        argv = [command, "--run", run, *options]
        if not self.started_here:
            argv += [] if "--" in options else ["--"]
            argv.append(f"base_output_directory={self.bucket}")
        return self._run(argv, timeout)

    def launcher(
        self, *argv: str, timeout: int = 120, cwd: Path = REPO
    ) -> subprocess.CompletedProcess:
        """Any other `tpu-launcher` command against this cluster, as submit's state left it."""
        env = {**os.environ, "LAUNCHER_STATE_DIR": str(self.bucket / ".state")}
        return tpu_launcher(*argv, cwd=cwd, env=env, timeout=timeout)

    def _run(self, argv: list[str], timeout: int, cwd: Path = REPO) -> tuple[int, str]:
        proc = self.launcher(*argv, timeout=timeout, cwd=cwd)
        return proc.returncode, proc.stdout + proc.stderr


@contextmanager
def reshaped(cluster: LocalCluster, *up_args: str, restart: bool = True) -> Iterator[LocalCluster]:
    """The session's local cluster for a module that needs another shape: restarted with
    `up_args` (unless `restart` is False: it has that shape already); one started by
    `tpu-launcher up` gets its default shape back after the module."""
    bucket = str(cluster.bucket if cluster.started_here else ".local/bucket")

    def start(*args: str) -> None:
        local_cluster_command("down", check=False)
        up = local_cluster_command("up", "--bucket-dir", bucket, *args, check=False)
        assert up.returncode == 0, up.stdout + up.stderr

    if restart:
        start(*up_args)
    yield cluster
    if not cluster.started_here:
        start()


def full_log(output: str) -> str:
    """The job's whole log, which `submit` keeps in the file it names first ("full log: PATH")."""
    paths = [e.fields["path"] for e in events(output, EventKind.FULL_LOG)]
    return Path(paths[-1]).read_text() if paths else output


def launcher_result(output: str) -> dict:
    """The job's machine-readable result, from its whole log (the terminal does not show it)."""
    result = last_result(output) or last_result(full_log(output))
    assert result is not None, f"the job printed no summary:\n{full_log(output)[-4000:]}"
    return result


def run_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"
