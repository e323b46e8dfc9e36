"""What a PyTorch script asks of its process group, read from its source before any worker
starts. A script written for `torchrun` makes its own default group
(`dist.init_process_group(backend="gloo")`); under the launcher Ray Train has made it already,
and the script's call takes that group (launcher.runtime.torch.contract) when it names the
backend the slice gives, or none. A backend no slice of ours gives (NCCL: no GPU here) is
refused here, at submit and in the job's driver, with the line to change, instead of failing on
every worker and being retried."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from launcher.core.errors import UsageError

# The process group a slice gives: Ray Train's TPU backend (TorchTPU's `tpu_dist`) on TPU; the
# launcher's stand-in, gloo, where CPUs simulate the chips (the local cluster).
TPU_BACKEND, SIMULATED_BACKEND = "tpu_dist", "gloo"
SLICE_BACKENDS = (TPU_BACKEND, SIMULATED_BACKEND)


@dataclass(frozen=True)
class BackendCall:
    """An `init_process_group` call of the script that names its backend as a constant."""

    line: int
    backend: str

    def named(self) -> set[str]:
        """The backends it names: `gloo`, or each of `cpu:gloo,cuda:nccl`'s."""
        return {part.rpartition(":")[2].strip() for part in self.backend.split(",")}

    def takes(self, backend: str) -> bool:
        """Whether the group `backend` is the group this call asks for (one of its devices')."""
        return backend in self.named()


def backend_calls(source: str) -> list[BackendCall]:
    """The script's `init_process_group(...)` calls whose backend is a string constant (the
    first argument or `backend=`); a computed one is checked when the call runs."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name != "init_process_group":
            continue
        given = node.args[0] if node.args else None
        given = next((k.value for k in node.keywords if k.arg == "backend"), given)
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            found.append(BackendCall(node.lineno, given.value))
    return found


def refusal(script: str, call: BackendCall, backends: tuple[str, ...]) -> UsageError:
    gives = " or ".join(backends)
    return UsageError(
        f"{script}:{call.line}",
        f"init_process_group(backend={call.backend!r}): the slice's process group is {gives} "
        "(Ray Train makes it on every chip before the script runs, with the torchrun "
        "variables RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set)",
        f"line {call.line}: call init_process_group() without a backend (the slice's is taken),"
        f" or with backend={backends[0]!r}",
    )


def check_backends(script: Path, backends: tuple[str, ...] = SLICE_BACKENDS) -> None:
    """Refuses a script whose init_process_group names a backend none of `backends` is."""
    try:
        calls = backend_calls(script.read_text())
    except SyntaxError as e:
        raise UsageError(
            f"{script}:{e.lineno}", f"is not Python: {e.msg}", "fix the script, then submit"
        ) from e
    for call in calls:
        if not any(call.takes(b) for b in backends):
            raise refusal(str(script), call, backends)


def uses_torch_job(source: str) -> bool:
    """Whether the script imports the launcher's TorchJob (its progress, saves, notice save)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(TORCH_JOB):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith(TORCH_JOB) for a in node.names):
            return True
    return False


TORCH_JOB = "launcher.runtime.torch.job"
# The job's first lines for a script that uses no TorchJob: what it gets and does not.
PLAIN_SCRIPT_NOTE = (
    "launcher: {script} uses no TorchJob: it runs as torchrun runs it (RANK, WORLD_SIZE, "
    "LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT set; its init_process_group takes "
    "the slice's group), with restarts, the summary and goodput by wall time, and rank 0's "
    "output shown; progress lines, goodput by steps, the hang watchdog, resumable saves and the "
    "notice save come with TorchJob (docs/torch.md)"
)
