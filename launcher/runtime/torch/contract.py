"""The torchrun contract on every chip, for a script written to it: the environment torchrun
gives (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT: Ray Train sets
them before the script runs), and the script's own `init_process_group`, which takes the group
Ray Train has made when it names that group's backend or none (torchrun would make it; here it
exists) and is refused with the line to change otherwise. `destroy_process_group()` of the
default group is left to Ray Train, which ends the group after the script. And rank 0's output
is the job's: its lines are marked for the job's view (launcher.core.job.events' SCRIPT)."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from launcher.core.job.events import format_script, parse
from launcher.core.job.torch_script import BackendCall


class ScriptRefused(RuntimeError):
    """The script asked for a process group the slice does not give."""


@contextlib.contextmanager
def torchrun_contract(script: str) -> Iterator[None]:
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    from launcher.runtime.borrowed.torch import PATCHED, TORCH

    made_init, made_destroy = c10d.init_process_group, c10d.destroy_process_group

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> None:
        if not dist.is_initialized():
            return made_init(backend, *args, **kwargs)
        have = dist.get_backend()
        if backend is not None and not BackendCall(0, str(backend)).takes(have):
            raise ScriptRefused(
                f"{script}: init_process_group(backend={str(backend)!r}): the slice's process "
                f"group is {have}, made by Ray Train before the script runs; call "
                f"init_process_group() without a backend, or with backend={have!r}"
            )
        return None  # the group the script asked for: Ray Train's, made already

    def destroy_process_group(group: Any = None) -> None:
        if group is None or group is dist.group.WORLD:
            return None  # Ray Train's group: it ends it after the script (and on a restart)
        return made_destroy(group)

    ours: dict[str, Any] = {
        "init_process_group": init_process_group,
        "destroy_process_group": destroy_process_group,
    }

    def replacing(name: str) -> Callable[[Any], Any]:
        return lambda _: ours[name]

    with contextlib.ExitStack() as stack:
        for module, name in sorted(PATCHED):
            stack.enter_context(TORCH.patching(module, name, replacing(name)))
        yield


class _Marked(io.TextIOBase):
    """A stream whose every line of the script's own is marked as the script's (rank 0's output,
    for the job's view); the launcher's lines written through it (progress, checkpoints) stay
    as they are, which the view reads by their own marks."""

    def __init__(self, out: TextIO):
        self._out = out
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._out.write(_marked(line) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self._out.write(_marked(self._partial))
            self._partial = ""
        self._out.flush()


def _marked(line: str) -> str:
    return line if not line or parse(line) is not None else format_script(line)


@contextlib.contextmanager
def marked_output(rank: int) -> Iterator[None]:
    """Rank 0's stdout marked as the script's own; other ranks' as it is (the full log)."""
    if rank != 0:
        yield
        return
    saved = sys.stdout
    sys.stdout = _Marked(saved)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = saved
