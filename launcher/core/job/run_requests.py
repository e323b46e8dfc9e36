"""What `tpu-launcher generate` and `export` ask of a trained run, read once on the workstation
(`tpu-launcher generate|export`, which check and submit them) and again in the cluster
(`python -m launcher.runtime decode|convert`, which run them)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from launcher.core.errors import UsageError
from launcher.core.job.frameworks import JAX, TORCH
from launcher.core.runtime_door import JOB_ENTRYPOINT

TRAIN_ENTRYPOINT = [*JOB_ENTRYPOINT, JAX.command]
TORCH_TRAIN = TORCH.command  # a PyTorch job's (launcher.runtime.torch.entrypoint)
TORCH_ENTRYPOINT = [*JOB_ENTRYPOINT, TORCH_TRAIN]
DECODE_ENTRYPOINT = [*JOB_ENTRYPOINT, "decode"]
CONVERT_ENTRYPOINT = [*JOB_ENTRYPOINT, "convert"]
IMPORT_ENTRYPOINT = [*JOB_ENTRYPOINT, "hf-import"]


def job_args(values: list[str]) -> list[str]:
    """argparse's REMAINDER after `--`, without it."""
    return values[1:] if values[:1] == ["--"] else values


def add_run_options(
    p: argparse.ArgumentParser, run_required: bool = True, generating: bool = False
) -> None:
    """Which trained run and checkpoint, and the model keys over the run's own."""
    p.add_argument(
        "--run",
        required=run_required,
        help="the run_name it was trained with"
        + ("" if run_required else " (without it, --release asks a serving release's vLLM)")
        + ("; or an import's name (import:NAME where a run has it too)" if generating else ""),
    )
    p.add_argument("--step", type=int, help="the checkpoint (default: the latest committed)")
    p.add_argument(
        "maxtext_args",
        nargs=argparse.REMAINDER,
        help="-- then MaxText key=value over the run's own (or its whole config, first, "
        "for a run trained elsewhere)",
    )


def add_generation_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt", required=True, help="the text to continue")
    p.add_argument("--max-tokens", type=int, default=32, help="tokens to generate")
    p.add_argument("--seed", type=int, default=0, help="the same seed generates the same text")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature; 0: greedy")
    p.add_argument(
        "--chat",
        action="store_true",
        help="ask as a user: the prompt rendered by the run's tokenizer's chat template, the "
        "format a fine-tuned (--trainer=sft) run learned (a served model: the chat API)",
    )
    add_run_options(p, run_required=False, generating=True)


@dataclass(frozen=True)
class GenerateRequest:
    run: str
    prompt: str
    max_tokens: int = 32
    seed: int = 0
    temperature: float = 1.0  # 0: greedy
    step: int | None = None  # default: the run's latest committed checkpoint
    maxtext_argv: list[str] = field(default_factory=list)  # over the run's own arguments
    chat: bool = False  # the prompt is a user's turn, rendered by the chat template

    verb = "generate"  # the job id's prefix
    title = "generating"  # what submit's progress display says

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> GenerateRequest:
        return cls(
            ns.run,
            ns.prompt,
            max_tokens=ns.max_tokens,
            seed=ns.seed,
            temperature=ns.temperature,
            step=ns.step,
            maxtext_argv=job_args(ns.maxtext_args),
            chat=ns.chat,
        )

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
        if self.chat:
            argv.append("--chat")
        return [*argv, "--", *self.maxtext_argv] if self.maxtext_argv else argv


@dataclass(frozen=True)
class ExportRequest:
    run: str
    step: int | None = None  # default: the run's latest committed checkpoint
    maxtext_argv: list[str] = field(default_factory=list)  # over the run's own arguments

    verb = "export"
    title = "exporting"

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> ExportRequest:
        return cls(ns.run, step=ns.step, maxtext_argv=job_args(ns.maxtext_args))

    def command(self) -> list[str]:
        """The in-cluster command that runs this request."""
        argv = [*CONVERT_ENTRYPOINT, f"--run={self.run}"]
        if self.step is not None:
            argv.append(f"--step={self.step}")
        return [*argv, "--", *self.maxtext_argv] if self.maxtext_argv else argv


@dataclass(frozen=True)
class ImportRequest:
    """A Hugging Face model directory, as the job's hosts see it (absolute, or relative to the
    bucket's mount), or a Hub model (hf://ORG/NAME[@REVISION]) the job downloads there, to
    convert into MaxText's parameters under imports/<name>/."""

    name: str
    source: str

    verb = "import"
    title = "importing"

    @property
    def run(self) -> str:  # what names the job: import-<name>
        return self.name

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> ImportRequest:
        return cls(ns.name, ns.source)

    def command(self) -> list[str]:
        return [*IMPORT_ENTRYPOINT, f"--name={self.name}", f"--source={self.source}"]


def check_request(request: GenerateRequest | ExportRequest | ImportRequest) -> None:
    """What can be refused before anything starts. Raises UsageError."""
    if isinstance(request, ImportRequest):
        _check_import(request)
        return
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


def _check_import(request: ImportRequest) -> None:
    from launcher.core.maxtext.model_imports import check_import_name, hub_model

    check_import_name(request.name)
    source = request.source
    hub_model(source)  # a malformed hf:// id is refused here, before a job starts
    if not source:
        raise UsageError("SOURCE", "is empty", "name the model's directory: /data/hf/llama-3.1-8b")
    if source.startswith("gs://"):
        raise UsageError(
            "SOURCE",
            f"{source} is a bucket URL; the job reads the bucket through its mount",
            "give the directory as the job sees it: relative to the bucket (hf/llama-3.1-8b "
            "for gs://BUCKET/hf/llama-3.1-8b) or absolute under its mount",
        )
