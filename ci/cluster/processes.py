"""Background processes of the test clusters (controllers, the node's daemons): each started in
a session of its own, so that it outlives the script that started it, with its pid and log in
one directory; stopped by its process group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


class Processes:
    def __init__(self, run: Path, env: dict[str, str] | None = None) -> None:
        self.run = run
        self.env = env or {}

    def start(self, name: str, argv: list[str]) -> None:
        log = (self.run / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
            cwd=self.run,
            start_new_session=True,
        )
        (self.run / f"{name}.pid").write_text(str(proc.pid))

    def running(self, name: str) -> bool:
        try:
            os.kill(int((self.run / f"{name}.pid").read_text()), 0)
            return True
        except (OSError, ValueError):
            return False

    def stop(self, name: str, grace_s: float = 10) -> None:
        pid_file = self.run / f"{name}.pid"
        if self.running(name):
            pid = int(pid_file.read_text())
            os.killpg(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                os.killpg(pid, signal.SIGKILL)
        pid_file.unlink(missing_ok=True)
