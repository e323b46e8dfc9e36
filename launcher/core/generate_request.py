"""What `make generate` asks for, read once on the workstation (`tpu-launcher generate`, which
checks it and submits it) and again in the cluster (`tpu-launcher decode`, which runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from launcher.core.errors import UsageError

DECODE_ENTRYPOINT = ["python", "-m", "launcher", "decode"]
# The line the generation's summary starts with (submit shows it whole).
GENERATED_MARK = "== generated =="


@dataclass(frozen=True)
class GenerateRequest:
    run: str
    prompt: str
    max_tokens: int = 32
    seed: int = 0
    temperature: float = 1.0  # 0: greedy
    step: int | None = None  # default: the run's latest committed checkpoint
    maxtext_argv: list[str] = field(default_factory=list)  # over the run's own arguments

    def decode_argv(self) -> list[str]:
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


def check_request(request: GenerateRequest) -> None:
    """What can be refused before anything starts. Raises UsageError."""
    if not request.run:
        raise UsageError("RUN", "is empty", "name the run to generate from: RUN=demo")
    if not request.prompt:
        raise UsageError("PROMPT", "is empty", 'give the text to continue: PROMPT="hello"')
    if request.max_tokens < 1:
        raise UsageError(
            "MAX_TOKENS", f"must be at least 1, got {request.max_tokens}", "MAX_TOKENS=32"
        )
    if request.temperature < 0:
        raise UsageError(
            "TEMPERATURE",
            f"must be 0 (greedy) or more, got {request.temperature}",
            "TEMPERATURE=0 for greedy decoding, 1.0 to sample from the model as trained",
        )
