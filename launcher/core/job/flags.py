"""The launcher's own flags of a training job (`--tpu=v6e-16 --max_failures=3 ...`), defined
once: absl parses them in the cluster's entrypoint and in every workstation command that reads
a job's words (launcher.core.job.plan), and `submit --help` lists them with their bounds."""

from __future__ import annotations

from dataclasses import dataclass

from absl import flags

from launcher.core.errors import UsageError
from launcher.core.job.checkpoint_tiers import BUCKET, CONTINUOUS, CONTINUOUS_KEPT, TIERS
from launcher.core.job.trainers import TRAINERS
from launcher.core.tpu.table import GENERATIONS

# JAX's persistent compilation cache (MaxText's jax_cache_dir) goes in the output directory on
# the bucket (run_dir.compile_cache_for), shared by its runs: every restart, and every run of
# the same shapes, loads the compiled step instead of compiling it again. MaxText's own default
# (base.yml) is a directory in the pod, which a restarted pod no longer has.
MAXTEXT_DEFAULT_CACHE_DIR = "~/jax_cache"
# The hang watchdog's least bound: longer than a synchronous save or an eval of a large model
# on a slice, shorter than the time a person notices a stalled job. PyTorch's NCCL watchdog
# waits 10 minutes by default; XLA's collectives on TPU wait forever.
DEFAULT_HANG_TIMEOUT_S = 900.0
DEFAULT_HANG_STEP_FACTOR = 10.0
DEFAULT_MAX_HANGS = 3
DEFAULT_MAX_FAILURES = 3

NO_LIMIT = "-1 (no limit), 0 or more"
OFF_OR_MORE = "0 (off) or more"


@dataclass(frozen=True)
class PolicyFlag:
    """A flag of the job's policy (restarts, the hang watchdog, metrics), which every framework's
    job takes: declared here once, with its bound, and read by MaxText's jobs (absl, below) and
    PyTorch's (launcher.core.job.torch_plan) alike."""

    name: str
    kind: type  # int, float or bool
    default: int | float | bool
    help: str
    lower_bound: int | float | None = None
    allowed: str = ""  # the bound in words, for a refusal's fix

    def check(self, value: int | float | bool) -> None:
        """Refuses a value below the bound, as both frameworks' parsers do."""
        if self.lower_bound is not None and value < self.lower_bound:
            raise UsageError(f"--{self.name}", f"is {value:g}", self.allowed)


POLICY_FLAGS: tuple[PolicyFlag, ...] = (
    PolicyFlag(
        "max_failures",
        int,
        DEFAULT_MAX_FAILURES,
        "Restarts of the worker group after a host fails; the job resumes from the latest "
        "checkpoint each time. Preemptions do not count.",
        -1,
        NO_LIMIT,
    ),
    PolicyFlag(
        "max_preemptions",
        int,
        -1,
        "Restarts after a host is preempted (spot, flex-start, maintenance; -1: no limit). "
        "On the notice every host saves the step they reach next, and the restart resumes there.",
        -1,
        NO_LIMIT,
    ),
    PolicyFlag(
        "hang_timeout_s",
        float,
        DEFAULT_HANG_TIMEOUT_S,
        "The hang watchdog: a host that finishes no step, eval or save for this long (or "
        "--hang_step_factor times the median step time, if longer) writes every host's stacks "
        "to the log and the run's hangs/ directory, and the job restarts from its last "
        "checkpoint. Armed at each start's first step: compiles and restores never count. "
        "0: off.",
        0,
        OFF_OR_MORE,
    ),
    PolicyFlag(
        "hang_step_factor",
        float,
        DEFAULT_HANG_STEP_FACTOR,
        "The hang bound in median step times, when longer than --hang_timeout_s.",
        0,
        OFF_OR_MORE,
    ),
    PolicyFlag(
        "max_hangs",
        int,
        DEFAULT_MAX_HANGS,
        "Restarts after a hang (-1: no limit); failures and preemptions do not count.",
        -1,
        NO_LIMIT,
    ),
    PolicyFlag(
        "metrics",
        bool,
        True,
        "Export the job's figures (step, step time, tokens/s, MFU, loss, goodput, checkpoints, "
        "restarts) as Ray metrics, which the chart's scrape object and dashboard read; "
        "--nometrics: none.",
    ),
    PolicyFlag(
        "price_per_chip_hour",
        float,
        0.0,
        "USD per TPU chip-hour for the job's cost in its summary, `status` and `list --json` "
        "(0: the release's cost.pricesPerChipHour, else the launcher's dated list price for "
        "the slice's generation and capacity: `tpu-launcher tpu-table --prices`).",
        0,
        "0 (the table's price) or more",
    ),
    PolicyFlag("dry_run", bool, False, "Validate and print the plan as JSON; start no workers."),
)
POLICY = {flag.name: flag for flag in POLICY_FLAGS}


def define_policy_flag(name: str, fv: flags.FlagValues) -> None:
    """One flag of POLICY_FLAGS, on an absl flag set."""
    flag = POLICY[name]
    if flag.kind is bool:
        flags.DEFINE_bool(name, bool(flag.default), flag.help, flag_values=fv)
    elif flag.kind is int:
        bound = None if flag.lower_bound is None else int(flag.lower_bound)
        flags.DEFINE_integer(name, int(flag.default), flag.help, lower_bound=bound, flag_values=fv)
    else:
        flags.DEFINE_float(
            name, flag.default, flag.help, lower_bound=flag.lower_bound, flag_values=fv
        )


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
        None,
        "Elastic: run on as few as this many whole slices when the others are gone (preempted) "
        "and grow back to --num_slices when they return; the global batch is kept by more "
        "gradient accumulation. Default: the release's ray.worker.tpu.minSlices, else "
        "--num_slices (every slice, always).",
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
        None,
        "CPU-only slice: number of hosts (Ray workers). Default: the release's CPU slice.",
        lower_bound=1,
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "cpu_devices_per_host",
        None,
        "CPU-only slice: JAX devices per host.",
        lower_bound=1,
        flag_values=fv,
    )
    define_policy_flag("max_failures", fv)
    define_policy_flag("max_preemptions", fv)
    define_policy_flag("hang_timeout_s", fv)
    define_policy_flag("hang_step_factor", fv)
    define_policy_flag("max_hangs", fv)
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
    define_policy_flag("metrics", fv)
    define_policy_flag("price_per_chip_hour", fv)
    flags.DEFINE_enum(
        "checkpoint_tier",
        BUCKET,
        list(TIERS),
        "Where checkpoints go: bucket (every save, through gcsfuse), or memory (Orbax's "
        "emergency checkpointing: every local_checkpoint_period steps to the TPU hosts' memory "
        "volumes, every checkpoint_period to the bucket; a restart restores from the nearest "
        "whole copy; two slices or more, a release with checkpoints.tier=memory). Default: the "
        "release's checkpoints.tier.",
        flag_values=fv,
    )
    flags.DEFINE_enum(
        "continuous_checkpointing",
        "auto",
        list(CONTINUOUS),
        "Save to the bucket as soon as the previous save finished (MaxText's "
        "enable_continuous_checkpointing), keeping the last "
        f"{CONTINUOUS_KEPT} (max_num_checkpoints_to_keep, unless given). auto: on where the "
        "slices are Spot or flex-start (a reclaim loses the steps since the last save), off "
        "elsewhere and on the memory tier (it saves every few steps already).",
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
    define_policy_flag("dry_run", fv)


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
