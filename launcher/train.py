"""The JaxTrainer entrypoint: run MaxText on every host of one or more TPU slices.

    python -m launcher.train [--accelerator_type=v6e --topology=4x4 --num_slices=1]
        [maxtext config.yml] key=value ...

Every MaxText key=value passes through unchanged. The slice comes from the flags or, when they
are absent, from the Ray cluster's TPU nodes. Before any worker starts, the launcher checks the
parallelism against the slice, the output directory, and the required keys.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from absl import app, flags

from launcher import slices as slices_mod
from launcher.errors import UsageError, exit_with
from launcher.maxtext_args import MaxTextArgs, check_output_directory

# The chart sets this to the gcsfuse mount path; the local cluster to its bucket directory.
OUTPUT_DIR_ENV = "LAUNCHER_OUTPUT_DIR"
DEFAULT_OUTPUT_DIR = "/data"


def _env_int(name: str) -> int | None:
    """The chart sets the CPU slice on the head of CPU-only clusters, so jobs need no flags."""
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


FLAGS = flags.FLAGS
flags.DEFINE_string("accelerator_type", None, "TPU generation: v4, v5e, v5p, v6e (or TPU-V6E).")
flags.DEFINE_string("topology", None, "TPU topology of one slice, e.g. 4x4 or 2x2x2.")
flags.DEFINE_integer("num_slices", 1, "Number of slices of that shape (multi-slice over DCN).")
flags.DEFINE_integer("chips_per_host", None, "Only for v5e/v6e 2x4: 8 (one host) or 4 (two).")
flags.DEFINE_integer("cpu_hosts", _env_int("LAUNCHER_CPU_HOSTS"),
                     "CPU-only slice: number of hosts (Ray workers).")
flags.DEFINE_integer("cpu_devices_per_host", _env_int("LAUNCHER_CPU_DEVICES_PER_HOST"),
                     "CPU-only slice: JAX devices per host.")
flags.DEFINE_integer("max_failures", 3, "Restarts of the worker group after a host fails; "
                     "MaxText resumes from the latest checkpoint each time.")
flags.DEFINE_integer("steps_beyond_checkpoint", None,
                     "Train this many steps past the run's latest checkpoint (sets MaxText's "
                     "steps): a rerun of the same command trains further instead of stopping.")
flags.DEFINE_bool("dry_run", False, "Validate and print the plan as JSON; start no workers.")


def plan(argv: Sequence[str], nodes: list[dict] | None) -> tuple[slices_mod.Slices, MaxTextArgs]:
    """Parses and checks everything that can be checked before training. Raises UsageError."""
    args = MaxTextArgs.parse(list(argv[1:]))
    args.check_required()
    chosen = slices_mod.from_flags(
        FLAGS.accelerator_type, FLAGS.topology, FLAGS.num_slices, FLAGS.chips_per_host,
        FLAGS.cpu_hosts, FLAGS.cpu_devices_per_host,
    )
    if chosen is None:
        if nodes is None:
            raise UsageError("accelerator_type", "no slice given and no Ray cluster to read it "
                             "from", "pass --accelerator_type and --topology")
        chosen = slices_mod.from_cluster_nodes(nodes)
    elif nodes is not None:
        slices_mod.check_fits_cluster(chosen, nodes)
    args.check_parallelism(chosen.devices_per_slice, chosen.num_slices, chosen.describe())
    args = args.with_defaults(
        base_output_directory=os.environ.get(OUTPUT_DIR_ENV, DEFAULT_OUTPUT_DIR))
    out_dir = str(args.get("base_output_directory"))
    check_output_directory(out_dir)
    return chosen, check_steps(args, Path(out_dir) / str(args.get("run_name")))


def check_steps(args: MaxTextArgs, run_dir: Path) -> MaxTextArgs:
    """Resolves --steps_beyond_checkpoint and refuses a run that would train nothing (MaxText
    would fail on every host after minutes of start-up; this says it in a second)."""
    done = committed_checkpoints(run_dir)
    start = done[-1] + 1 if done else 0
    more = FLAGS.steps_beyond_checkpoint
    if more is not None:
        if "steps" in args.overrides:
            raise UsageError("steps_beyond_checkpoint", "was given together with steps=",
                             "keep one: steps= (a total) or --steps_beyond_checkpoint (more)")
        if more < 1:
            raise UsageError("steps_beyond_checkpoint", f"must be at least 1, got {more}",
                             "--steps_beyond_checkpoint=20")
        args = args.with_defaults(steps=start + more)
    steps = int(args.get("steps"))
    if done and 0 < steps <= start:  # steps=-1: MaxText takes the schedule's length
        raise UsageError(
            "steps",
            f"run {args.get('run_name')} already completed {start} steps (checkpoint "
            f"{done[-1]} in {run_dir / 'checkpoints'}); steps={steps} asks for no more",
            f"pass steps={start + steps} (or --steps_beyond_checkpoint=N) to train further, or "
            "a new run_name to start over",
        )
    return args


def committed_checkpoints(run_dir: Path) -> list[int]:
    """Committed Orbax checkpoint steps (unfinished saves live in *.orbax-checkpoint-tmp).
    A gs:// run directory is read by preflight's bucket check, not here: []."""
    ckpt_dir = run_dir / "checkpoints"
    if str(run_dir).startswith("gs:") or not ckpt_dir.is_dir():
        return []
    return sorted(int(p.name) for p in ckpt_dir.iterdir() if p.is_dir() and p.name.isdigit())


def _print_summary(args: MaxTextArgs, metrics: dict, seconds: float) -> None:
    run_name = args.get("run_name")
    run_dir = Path(str(args.get("base_output_directory"))) / str(run_name)
    steps = committed_checkpoints(run_dir)
    first = metrics.get("first_step")
    resumed = f"resumed at step {first}" if first else "started from step 0"
    print("\n== training finished ==", flush=True)
    print(f"run:          {run_name} ({resumed}; {metrics.get('steps_this_run', 0)} steps run "
          f"in {seconds:.0f}s)")
    print(f"steps done:   {metrics.get('last_step', -1) + 1} of {args.get('steps')}")
    if "final_loss" in metrics:
        print(f"loss:         {metrics['first_loss']:.4f} -> {metrics['final_loss']:.4f}")
    print(f"checkpoints:  {run_dir / 'checkpoints'} (steps {', '.join(map(str, steps)) or '-'})")
    print(f"tensorboard:  tensorboard --logdir {run_dir / 'tensorboard'}")
    print(f"resume:       submit again with run_name={run_name} and a larger steps= (or "
          "--steps_beyond_checkpoint=N; `make demo` does) to go on from the latest checkpoint")
    print("LAUNCHER_RESULT " + json.dumps({"run_dir": str(run_dir), "checkpoints": steps,
                                          **metrics}), flush=True)


def main(argv: Sequence[str]) -> int:
    try:
        dry = FLAGS.dry_run
        nodes = None
        if not dry or os.environ.get("RAY_ADDRESS"):
            # Ray folds "similar" lines from different workers into one; progress lines differ
            # only in numbers, so folding would hide them.
            os.environ.setdefault("RAY_DEDUP_LOGS", "0")
            import ray

            ray.init(log_to_driver=True)
            nodes = ray.nodes()
        chosen, args = plan(argv, nodes)
    except UsageError as e:
        exit_with(e, prog="launcher.train")
    scaling = chosen.scaling_config()
    print(f"launcher: {chosen.describe()}: {chosen.num_workers} workers x "
          f"{chosen.devices_per_host} devices = {chosen.num_devices} devices", flush=True)
    print("launcher: maxtext " + shlex.join(args.argv()[1:]), flush=True)
    if dry:
        print(json.dumps({
            "num_workers": scaling.num_workers, "use_tpu": scaling.use_tpu,
            "topology": scaling.topology, "accelerator_type": scaling.accelerator_type,
            "resources_per_worker": scaling.resources_per_worker,
            "placement_strategy": scaling.placement_strategy, "argv": args.argv(),
        }))
        return 0
    return _fit(chosen, args, scaling)


def _fit(chosen: slices_mod.Slices, args: MaxTextArgs, scaling) -> int:
    from ray.train import FailureConfig, RunConfig
    from ray.train.v2.jax import JaxTrainer

    from launcher.cpu_backend import CpuJaxConfig
    from launcher.worker import read_summary, train_loop_per_worker

    out_dir = str(args.get("base_output_directory")).rstrip("/")
    summary_key = f"summary/{args.get('run_name')}/{uuid.uuid4().hex}"
    env = {}
    if not chosen.is_tpu:
        env = {"JAX_PLATFORMS": "cpu",
               "XLA_FLAGS": f"--xla_force_host_platform_device_count={chosen.devices_per_host}"}
    trainer = JaxTrainer(
        train_loop_per_worker=train_loop_per_worker,
        train_loop_config={"argv": args.argv(), "steps": args.get("steps"),
                           "summary_key": summary_key},
        scaling_config=scaling,
        jax_config=None if chosen.is_tpu else CpuJaxConfig(),
        run_config=RunConfig(
            name=str(args.get("run_name")),
            storage_path=f"{out_dir}/ray_results",
            failure_config=FailureConfig(max_failures=FLAGS.max_failures),
            worker_runtime_env={"env_vars": env} if env else None,
        ),
    )
    start = time.monotonic()
    try:
        result = trainer.fit()
    except Exception as e:  # Ray wraps worker failures; show the cause, not Ray's internals
        print(f"\nlauncher: training failed after {FLAGS.max_failures} restarts: "
              f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        print(f"  checkpoints so far are kept under {out_dir}/{args.get('run_name')}/checkpoints;"
              " fix the cause and submit again with the same run_name to resume.",
              file=sys.stderr, flush=True)
        return 1
    del result  # Ray Train keeps metrics only with Ray checkpoints; MaxText owns ours
    _print_summary(args, read_summary(summary_key), time.monotonic() - start)
    return 0


def run() -> None:
    app.run(main)


if __name__ == "__main__":
    run()
