"""The launcher's own flags of a training job (`--tpu=v6e-16 --max_failures=3 ...`), defined
once: absl parses them in the cluster's entrypoint and in every workstation command that reads
a job's words (launcher.core.job_plan), and `submit --help` lists them with their bounds."""

from __future__ import annotations

import os

from absl import flags

from launcher.core.tpu_table import GENERATIONS
from launcher.core.trainers import TRAINERS

# The chart sets the CPU slice on the head of CPU-only clusters, so jobs need no flags.
CPU_HOSTS_ENV = "LAUNCHER_CPU_HOSTS"
CPU_DEVICES_ENV = "LAUNCHER_CPU_DEVICES_PER_HOST"
# The chart's ray.worker.tpu.minSlices, set on the head: jobs are elastic down to it by default.
MIN_SLICES_ENV = "LAUNCHER_MIN_SLICES"
# JAX's persistent compilation cache (MaxText's jax_cache_dir) goes in the run's directory on
# the bucket (RunDir), next to the checkpoints: every restart, and every resubmission with the
# same arguments, loads the compiled step instead of compiling it again. MaxText's own default
# (base.yml) is a directory in the pod, which a restarted pod no longer has.
MAXTEXT_DEFAULT_CACHE_DIR = "~/jax_cache"
# The hang watchdog's least bound: longer than a synchronous save or an eval of a large model
# on a slice, shorter than the time a person notices a stalled job. PyTorch's NCCL watchdog
# waits 10 minutes by default; XLA's collectives on TPU wait forever.
DEFAULT_HANG_TIMEOUT_S = 900.0
DEFAULT_HANG_STEP_FACTOR = 10.0
DEFAULT_MAX_HANGS = 3
DEFAULT_MAX_FAILURES = 3


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


def define_flags(fv: flags.FlagValues) -> None:
    """The launcher's flags, on `fv` (absl's global FLAGS in the entrypoint; a private set
    where a workstation command parses a job's arguments)."""
    flags.DEFINE_string(
        "tpu",
        None,
        "The slice, as Cloud TPU names it: v6e-16, v5p-16, v5litepod-32, tpu7x-16 (v4/v5p "
        "count TensorCores, the others chips; `tpu-launcher tpu-table` lists them). The long "
        "form is --accelerator_type and --topology.",
        flag_values=fv,
    )
    flags.DEFINE_string(
        "accelerator_type",
        None,
        f"TPU generation: {', '.join(GENERATIONS)} (or Ray's TPU-V6E).",
        flag_values=fv,
    )
    flags.DEFINE_string(
        "topology", None, "TPU topology of one slice, e.g. 4x4 or 2x2x2.", flag_values=fv
    )
    flags.DEFINE_integer(
        "num_slices",
        1,
        "Number of slices of that shape (multi-slice over DCN).",
        lower_bound=1,
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "min_slices",
        _env_int(MIN_SLICES_ENV),
        "Elastic: run on as few as this many whole slices when the others are gone (preempted) "
        "and grow back to --num_slices when they return; the global batch is kept by more "
        "gradient accumulation. Default: --num_slices (every slice, always).",
        flag_values=fv,
    )
    flags.DEFINE_bool(
        "allow_changing_batch",
        False,
        "Elastic: let the global batch shrink on a number of slices that cannot keep it exactly "
        "(otherwise such a job is refused at submission).",
        flag_values=fv,
    )
    flags.DEFINE_float(
        "resize_check_s",
        60.0,
        "Elastic: how often, while training on fewer slices, Ray checks whether slices came "
        "back (each grow restarts from the latest checkpoint).",
        lower_bound=0,
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "chips_per_host",
        None,
        "Only for v5e/v6e 2x4: 8 (one host) or 4 (two).",
        lower_bound=1,
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "cpu_hosts",
        _env_int(CPU_HOSTS_ENV),
        "CPU-only slice: number of hosts (Ray workers).",
        lower_bound=1,
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "cpu_devices_per_host",
        _env_int(CPU_DEVICES_ENV),
        "CPU-only slice: JAX devices per host.",
        lower_bound=1,
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "max_failures",
        DEFAULT_MAX_FAILURES,
        "Restarts of the worker group after a host fails; "
        "MaxText resumes from the latest checkpoint each time. Preemptions do not count.",
        lower_bound=-1,
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "max_preemptions",
        -1,
        "Restarts after a host is preempted (spot, flex-start, maintenance; -1: no limit). "
        "On the notice every host saves the step they reach next, and the restart resumes there.",
        lower_bound=-1,
        flag_values=fv,
    )
    flags.DEFINE_float(
        "hang_timeout_s",
        DEFAULT_HANG_TIMEOUT_S,
        "The hang watchdog: a host that finishes no step, eval or save for this long (or "
        "--hang_step_factor times the median step time, if longer) writes every host's stacks "
        "to the log and the run's hangs/ directory, and the job restarts from its last "
        "checkpoint. Armed at each start's first step: compiles and restores never count. "
        "0: off.",
        lower_bound=0,
        flag_values=fv,
    )
    flags.DEFINE_float(
        "hang_step_factor",
        DEFAULT_HANG_STEP_FACTOR,
        "The hang bound in median step times, when longer than --hang_timeout_s.",
        lower_bound=0,
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "max_hangs",
        DEFAULT_MAX_HANGS,
        "Restarts after a hang (-1: no limit); failures and preemptions do not count.",
        lower_bound=-1,
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "steps_beyond_checkpoint",
        None,
        "Train this many steps past the run's latest checkpoint (sets MaxText's "
        "steps): a rerun of the same command trains further instead of "
        "stopping.",
        lower_bound=1,
        flag_values=fv,
    )
    flags.DEFINE_string(
        "libtpu_init_args",
        "",
        "XLA's TPU compiler flags for this job (LIBTPU_INIT_ARGS on every host), e.g. the "
        "async-collective flags `preflight --advise` recommends; preflight compiles with them.",
        flag_values=fv,
    )
    flags.DEFINE_bool(
        "metrics",
        True,
        "Export the job's figures (step, step time, tokens/s, MFU, loss, goodput, checkpoints, "
        "restarts) as Ray metrics, which the chart's scrape object and dashboard read; "
        "--nometrics: none.",
        flag_values=fv,
    )
    flags.DEFINE_string(
        "data",
        None,
        "A dataset `tpu-launcher data prepare` wrote to the bucket (datasets/NAME): sets "
        "MaxText's dataset_type=grain, its train and eval files and its tokenizer; the plan "
        "prints its examples, tokens and the epochs the steps mean.",
        flag_values=fv,
    )
    flags.DEFINE_string(
        "from",
        None,
        "A model `tpu-launcher import` wrote to the bucket (imports/NAME), or a run's "
        "checkpoint (RUN, RUN@STEP; default its latest): the job starts from its parameters "
        "(MaxText's load_parameters_path, a new optimizer) with its model keys and tokenizer.",
        flag_values=fv,
    )
    flags.DEFINE_enum(
        "trainer",
        "pretrain",
        list(TRAINERS),
        "MaxText's trainer: pretrain, or sft (its train loop on an instruction set, --data "
        "prepared with --fields prompt,completion, rendered by the tokenizer's chat template, "
        "the loss on the completions); dpo and rl are refused with what blocks them.",
        flag_values=fv,
    )
    flags.DEFINE_bool(
        "record_examples",
        False,
        "Audit the data: every host writes, for each step, a hash of each example its batch "
        "held (as MaxText's train loop got it) to <run>/examples/, one file per host and "
        "start; a resume shows there whether it went on where the data stopped.",
        flag_values=fv,
    )
    flags.DEFINE_bool(
        "dry_run", False, "Validate and print the plan as JSON; start no workers.", flag_values=fv
    )


def job_flags_help() -> str:
    """The job's flags as `submit --help` and `preflight --help` list them."""
    import textwrap

    fv = flags.FlagValues()  # type: ignore[no-untyped-call]  # absl's own, untyped
    define_flags(fv)
    lines = []
    for name in fv:  # in the order they are defined
        flag = fv[name]
        default = "" if flag.default in (None, "") else f" (default {flag.default})"
        lines.append(f"  --{name}{default}")
        lines += textwrap.wrap(flag.help, 94, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)
