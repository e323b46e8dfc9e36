"""What `tpu-launcher generate` and `export` ask of a trained run, read once on the workstation
(`tpu-launcher generate|export`, which check and submit them) and again in the cluster
(`tpu-launcher decode|convert`, which run them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from launcher.core.errors import UsageError

DECODE_ENTRYPOINT = ["python", "-m", "launcher", "decode"]
CONVERT_ENTRYPOINT = ["python", "-m", "launcher", "convert"]


@dataclass(frozen=True)
class GenerateRequest:
    run: str
    prompt: str
    max_tokens: int = 32
    seed: int = 0
    temperature: float = 1.0  # 0: greedy
    step: int | None = None  # default: the run's latest committed checkpoint
    maxtext_argv: list[str] = field(default_factory=list)  # over the run's own arguments

    verb = "generate"  # the job id's prefix
    title = "generating"  # what submit's progress display says

    def command(self) -> list[str]:
        """The in-cluster command that runs this request."""
        argv = [
            *DECODE_ENTRYPOINT,
            f"--run={self.run}",
            f"--prompt={self.prompt}",
            f"--max-tokens={self.max_tokens}",
            f"--seed={self.seed}",
            f"--temperature={self.temperature}",
        ]
        if self.step is not None:
            argv.append(f"--step={self.step}")
        return [*argv, "--", *self.maxtext_argv] if self.maxtext_argv else argv


@dataclass(frozen=True)
class ExportRequest:
    run: str
    step: int | None = None  # default: the run's latest committed checkpoint
    maxtext_argv: list[str] = field(default_factory=list)  # over the run's own arguments

    verb = "export"
    title = "exporting"

    def command(self) -> list[str]:
        """The in-cluster command that runs this request."""
        argv = [*CONVERT_ENTRYPOINT, f"--run={self.run}"]
        if self.step is not None:
            argv.append(f"--step={self.step}")
        return [*argv, "--", *self.maxtext_argv] if self.maxtext_argv else argv


def check_request(request: GenerateRequest | ExportRequest) -> None:
    """What can be refused before anything starts. Raises UsageError."""
    if not request.run:
        raise UsageError("--run", "is empty", "name the run: --run demo")
    if isinstance(request, ExportRequest):
        return
    if not request.prompt:
        raise UsageError("--prompt", "is empty", 'give the text to continue: --prompt "hello"')
    if request.max_tokens < 1:
        raise UsageError(
            "--max-tokens", f"must be at least 1, got {request.max_tokens}", "--max-tokens 32"
        )
    if request.temperature < 0:
        raise UsageError(
            "--temperature",
            f"must be 0 (greedy) or more, got {request.temperature}",
            "--temperature 0 for greedy decoding, 1.0 to sample from the model as trained",
        )
