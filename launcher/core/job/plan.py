"""A training job, parsed once and planned once.

The launcher's own flags (`--accelerator_type=v6e --topology=4x4 ...`) come first in a job's
arguments, MaxText's `[config.yml] key=value ...` follow. Each entry point parses them once
into a frozen `JobOptions` (a workstation's commands into a `Job`, with the words as given),
and `plan_job` does the rest the same way for all three callers:
`python -m launcher.runtime train` in the cluster (with the Ray cluster's nodes and the bucket
mount), `tpu-launcher submit` on a workstation (before anything is sent), and preflight (with the
target slice of a values file or a release).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from absl import flags

from launcher.core.data.checks import DataPlan, check_data, check_elastic_data, resolve_data
from launcher.core.data.datasets import DATASETS_SUBDIR
from launcher.core.errors import UsageError
from launcher.core.job.checkpoint_tiers import BUCKET, plan_continuous, plan_tier
from launcher.core.job.checkpoints import resolve_steps
from launcher.core.job.flags import (
    DEFAULT_HANG_STEP_FACTOR,
    DEFAULT_HANG_TIMEOUT_S,
    DEFAULT_MAX_FAILURES,
    DEFAULT_MAX_HANGS,
    MAXTEXT_DEFAULT_CACHE_DIR,
    define_flags,
)
from launcher.core.job.frameworks import JAX, Framework
from launcher.core.job.run_dir import RunDir, compile_cache_for
from launcher.core.job.start_from import StartingPoint, resolve_from
from launcher.core.job.trainers import (
    PRETRAIN,
    check_chat_template,
    describe_trainer,
    trainer_keys,
)
from launcher.core.maxtext.args import MaxTextArgs, check_output_directory
from launcher.core.maxtext.model_imports import IMPORTS_SUBDIR
from launcher.core.release_facts import NO_RELEASE, ReleaseFacts
from launcher.core.runtime_door import RUNTIME_PROG
from launcher.core.tpu import slices as slices_mod
from launcher.core.tpu.capacity import parse_items
from launcher.core.tpu.elastic import SliceSizing, sizings
from launcher.core.tpu.slices import Slices

CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class JobOptions:
    """The launcher's flags, read once."""

    tpu: str | None = None
    accelerator_type: str | None = None
    topology: str | None = None
    num_slices: int = 1
    min_slices: int | None = None
    allow_changing_batch: bool = False
    resize_check_s: float = 60.0
    chips_per_host: int | None = None
    cpu_hosts: int | None = None
    cpu_devices_per_host: int | None = None
    max_failures: int = DEFAULT_MAX_FAILURES
    max_preemptions: int = -1
    hang_timeout_s: float = DEFAULT_HANG_TIMEOUT_S
    hang_step_factor: float = DEFAULT_HANG_STEP_FACTOR
    max_hangs: int = DEFAULT_MAX_HANGS
    steps_beyond_checkpoint: int | None = None
    libtpu_init_args: str = ""
    metrics: bool = True
    price_per_chip_hour: float = 0.0  # 0: the release's or the table's price
    checkpoint_tier: str = BUCKET
    continuous_checkpointing: str = "auto"
    data: str | None = None
    from_: str | None = None  # --from, a keyword in Python
    trainer: str = PRETRAIN
    record_examples: bool = False
    dry_run: bool = False

    @classmethod
    def from_flags(cls, fv: flags.FlagValues) -> JobOptions:
        values: dict[str, Any] = {f.name: fv[f.name.rstrip("_")].value for f in fields(cls)}
        return cls(**values)

    def slice_request(self) -> Slices | None:
        """The slice these flags ask for, or None when they name none (the cluster decides)."""
        return slices_mod.from_flags(
            self.accelerator_type,
            self.topology,
            self.num_slices,
            self.chips_per_host,
            self.cpu_hosts,
            self.cpu_devices_per_host,
            tpu=self.tpu,
        )

    def with_release(self, release: ReleaseFacts, given: frozenset[str]) -> JobOptions:
        """These options with the release's defaults for what the job does not give (`given`:
        the flags it names): the checkpoint tier, an elastic job's minimum slices, and on a
        release without TPUs its CPU slice. The head and a workstation apply the same."""
        defaults: dict[str, Any] = {"checkpoint_tier": release.checkpoint_tier}
        if release.min_slices is not None:
            defaults["min_slices"] = release.min_slices
        names_slice = {"tpu", "accelerator_type", "topology", "cpu_hosts", "cpu_devices_per_host"}
        if release.cpu_slice is not None and not names_slice & given:
            defaults["cpu_hosts"] = release.cpu_slice.hosts
            defaults["cpu_devices_per_host"] = release.cpu_slice.devices_per_host
        return replace(self, **{k: v for k, v in defaults.items() if k not in given})


def given_flags(fv: flags.FlagValues) -> frozenset[str]:
    """The flags of `fv` a command line named (absl's `present`)."""
    return frozenset(name for name in fv if fv[name].present)


def spelled_as_defined(job_args: list[str], fv: flags.FlagValues) -> list[str]:
    """The job's arguments with each flag of `fv` spelled with dashes (`--max-failures=2`, as
    most command lines spell them) spelled as defined (`--max_failures=2`); MaxText's
    key=value arguments are left as they are."""
    known = set(fv)
    spelled = []
    for arg in job_args:
        name, eq, value = arg.partition("=")
        if name.startswith("--") and "-" in name[2:]:
            underscored = name[2:].replace("-", "_")
            if underscored in known:
                arg = f"--{underscored}{eq}{value}"
            elif underscored.startswith("no_") and underscored[3:] in known:  # --no-metrics
                arg = f"--no{underscored[3:]}{eq}{value}"
        spelled.append(arg)
    return spelled


@dataclass(frozen=True)
class Job:
    """A job's arguments, read once where they come in (a command's words, a RayJob's args)
    and handed down: nothing below that edge parses them again."""

    words: tuple[str, ...]  # as given: what is shipped to the cluster
    options: JobOptions  # the launcher's flags
    maxtext_argv: tuple[str, ...]  # MaxText's [config.yml] key=value ...
    given: frozenset[str] = frozenset()  # the launcher's flags the words name

    def with_release(self, release: ReleaseFacts) -> JobOptions:
        """The options as the release's head runs them (JobOptions.with_release)."""
        return self.options.with_release(release, self.given)


def parse_job_args(job_args: list[str]) -> Job:
    """Splits a job's arguments into the launcher's options and MaxText's arguments. Called only
    at the edges, where a job's words arrive (tests/unit/test_package_layout.py holds it)."""
    for i, word in enumerate(job_args):
        # The words reach the hosts through shells, quoted; a control character in one is always
        # a mistake (a pasted newline), never MaxText's (the chart refuses it in ray.job.args).
        if CONTROL.search(word):
            raise UsageError(
                "job arguments",
                f"argument {i}, {word!r}, holds a control character (a newline, a tab)",
                "a job argument is one line: remove it (a value with spaces is one argument "
                "when quoted)",
            )
    fv = flags.FlagValues()  # type: ignore[no-untyped-call]  # absl's own, untyped
    define_flags(fv)
    try:
        rest = fv([f"{RUNTIME_PROG} train", *spelled_as_defined(job_args, fv)])
    except flags.Error as e:
        raise UsageError(
            "job flags", str(e), "`tpu-launcher submit --help` lists the job's flags and bounds"
        ) from None
    return Job(tuple(job_args), JobOptions.from_flags(fv), tuple(rest[1:]), given_flags(fv))


@dataclass(frozen=True)
class JobPlan:
    """What will run: on which slices (None: the cluster decides at submission), with which
    MaxText arguments (defaults added, nothing the user set changed)."""

    slices: Slices | None
    args: MaxTextArgs
    libtpu_init_args: str = ""  # LIBTPU_INIT_ARGS of the TPU hosts
    # What MaxText is told on each number of slices the job may run on (min_slices .. all).
    sizings: dict[int, SliceSizing] = field(default_factory=dict)
    resize_check_s: float = 60.0
    data: DataPlan | None = None  # None: not checked here (no view of the bucket)
    base_model: StartingPoint | None = None  # --from, where the bucket is seen

    def input_lines(self) -> list[str]:
        """What the job starts from and what it reads, as the plan prints them."""
        lines = [self.base_model.describe()] if self.base_model else []
        lines += describe_trainer(self.args)
        return lines + (self.data.describe() if self.data else [])

    @property
    def min_slices(self) -> int:
        return min(self.sizings, default=self.slices.num_slices if self.slices else 1)

    @property
    def framework(self) -> Framework:
        return JAX

    def steps_asked(self, metrics: Mapping[str, Any]) -> int | None:
        steps = self.args.get("steps")
        return int(steps) if steps is not None else None

    def tokens_per_step(self, num_devices: int) -> int:
        return self.args.tokens_per_step(num_devices)

    @property
    def run_name(self) -> str:
        return str(self.args.get("run_name"))

    @property
    def run_dir(self) -> RunDir:
        return RunDir(Path(str(self.args.get("base_output_directory"))) / self.run_name)


def plan_job(
    options: JobOptions,
    maxtext_argv: list[str],
    *,
    nodes: list[dict[str, Any]] | None = None,
    target: Slices | None = None,
    require_slice: bool = False,
    output_dir: str | None = None,
    data_root: str | None = None,
    hosts_data_root: str | None = None,
    release: ReleaseFacts = NO_RELEASE,
) -> JobPlan:
    """Parses and checks everything that can be checked before training. Raises UsageError.

    nodes: the Ray cluster's nodes, when there is one to hold the job to;
    target: the slice the job is meant for (preflight's values file or release);
    output_dir: where checkpoints go unless base_output_directory= says otherwise; given where
      the job runs (the bucket mount), so the directory and the steps are checked there.
    data_root: where --data's datasets/ are (default: output_dir); with neither, the job's
      data is resolved and checked where it runs, not here;
    hosts_data_root: where the job's hosts see data_root (preflight: /data, the bucket's mount);
    release: the facts of the release it runs on: the TPU workers' capacity items (for
      --continuous_checkpointing=auto) and the slices it offers where none may be up.
    """
    args = MaxTextArgs.parse(maxtext_argv)
    args.check_required()
    if str(args.get("run_name")) in (DATASETS_SUBDIR, IMPORTS_SUBDIR):
        raise UsageError(
            "run_name",
            f"{args.get('run_name')!r} is where the bucket keeps prepared datasets or imports",
            "pick another run_name",
        )
    request = options.slice_request()
    if target is not None and request is not None and request != target:
        raise UsageError(
            "accelerator_type",
            f"the job asks for {request.describe()} but its target is {target.describe()}",
            "drop --tpu/--accelerator_type/--topology/--num_slices from the job's arguments, or "
            "preflight it for the slice they name",
        )
    slices = target or request
    if nodes is not None:
        if slices is None:
            slices = slices_mod.cluster_slices(nodes, release.offered_slices)
        else:
            slices_mod.check_fits_cluster(slices, nodes, options.min_slices, release.offered_slices)
    if slices is None and require_slice:
        raise UsageError(
            "accelerator_type",
            "no slice given and no Ray cluster to read it from",
            "pass --accelerator_type and --topology",
        )
    sized: dict[int, SliceSizing] = {}
    if slices is not None:
        args.check_parallelism(slices.devices_per_slice, slices.num_slices, slices.describe())
        minimum = options.min_slices if options.min_slices is not None else slices.num_slices
        sized = sizings(args, slices, minimum, options.allow_changing_batch)
        if len(sized) > 1:
            check_elastic_data(args, options.data, minimum, slices.num_slices)
    if output_dir is not None:
        # A preemption notice saves the step every host reaches next
        # (launcher.runtime.train.preemption); without it MaxText stops at that step all the same,
        # having saved nothing.
        args = args.with_defaults(base_output_directory=output_dir, enable_autocheckpoint=True)
        out_dir = str(args.get("base_output_directory"))
        check_output_directory(out_dir)
        run_name = str(args.get("run_name"))
        args = resolve_steps(args, Path(out_dir) / run_name, options.steps_beyond_checkpoint)
        if args.get("jax_cache_dir") == MAXTEXT_DEFAULT_CACHE_DIR:  # unless the user chose one
            args = args.with_defaults(jax_cache_dir=compile_cache_for(out_dir))
    data = base = None
    # The datasets and imports are in the bucket the run writes to (base_output_directory).
    root = data_root or (str(args.get("base_output_directory")) if output_dir else None)
    view = (hosts_data_root, data_root) if hosts_data_root and data_root else None
    if root is not None:
        args, base = resolve_from(args, options.from_, hosts_data_root or root, root)
        args, data = resolve_data(args, options.data, hosts_data_root or root, root)
        data = check_data(args, data, slices.num_devices if slices else None, view)
    fields = data.manifest.fields if data and data.manifest else None
    args = args.with_defaults(**trainer_keys(options.trainer, args, fields))
    if root is not None:
        check_chat_template(args, view)
    args = plan_tier(
        options.checkpoint_tier,
        args,
        slices.num_slices if slices else None,
        len(sized) > 1,
    )
    capacities = release.capacities
    preemptible = (
        any(item.preemptible for item in parse_items(",".join(capacities))) if capacities else False
    )
    args = plan_continuous(options.continuous_checkpointing, args, preemptible)
    return JobPlan(
        slices, args, options.libtpu_init_args, sized, options.resize_check_s, data, base
    )
