"""The JaxTrainer entrypoint: run MaxText on every host of one or more TPU slices.

    python -m launcher.runtime train [--accelerator_type=v6e --topology=4x4 --num_slices=1]
        [maxtext config.yml] key=value ...

Every MaxText key=value passes through unchanged. The slice comes from the flags or, when they
are absent, from the Ray cluster's TPU nodes. Before any worker starts, the launcher checks the
parallelism against the slice, the output directory, and the required keys.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from absl import app, flags

from launcher.core.errors import UsageError, report
from launcher.core.job import plan as job_plan
from launcher.core.job.checkpoint_tiers import tier_plan
from launcher.core.job.flags import define_flags
from launcher.core.job.frameworks import JAX, check_image_runs
from launcher.core.job.hangs import HangBound
from launcher.core.job.plan import JobOptions, JobPlan, given_flags, plan_job
from launcher.core.job.run_dir import output_dir
from launcher.core.job.run_record import write_run_record
from launcher.core.release_facts import ReleaseFacts
from launcher.core.runtime_door import RUNTIME_PROG
from launcher.core.tpu.elastic import shorten_group_start_wait
from launcher.core.tpu.slices import CpuSlices, TpuSlices
from launcher.runtime.job import driver

FLAGS = flags.FLAGS
define_flags(FLAGS)


@functools.cache
def release() -> ReleaseFacts:
    """What the release this head belongs to tells its jobs (none on the local cluster)."""
    return ReleaseFacts.from_env()


# When this driver started: the goodput breakdown's wall time runs from here.
STARTED_AT = time.time()


def ray_nodes(options: JobOptions) -> list[dict] | None:
    """The Ray cluster's nodes; a dry run outside a Ray job has none."""
    if options.dry_run and not os.environ.get("RAY_ADDRESS"):
        return None
    return driver.join_ray()


def worker_env(plan: JobPlan) -> dict[str, str]:
    """What every host's worker process gets on top of its container's environment."""
    slices = plan.slices
    assert slices is not None
    if isinstance(slices, CpuSlices):
        return {
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": f"--xla_force_host_platform_device_count={slices.devices_per_host}",
        }
    return {"LIBTPU_INIT_ARGS": plan.libtpu_init_args} if plan.libtpu_init_args else {}


def config_by_absolute_path(maxtext_argv: list[str]) -> list[str]:
    """MaxText's argv with a config in the working directory (one shipped with the job) named by
    its absolute path, taken before Ray starts: every process then reads it where Ray unpacked
    it, whatever its own working directory is."""
    first = maxtext_argv[0] if maxtext_argv else ""
    if first.endswith((".yml", ".yaml")) and "=" not in first and os.path.isfile(first):
        return [os.path.abspath(first), *maxtext_argv[1:]]
    return maxtext_argv


def train(options: JobOptions, maxtext_argv: list[str]) -> int:
    """Plans the job, then (unless a dry run) trains it on the planned slices."""
    check_image_runs(JAX)
    maxtext_argv = config_by_absolute_path(maxtext_argv)
    plan = plan_job(
        options,
        maxtext_argv,
        nodes=ray_nodes(options),
        require_slice=True,
        output_dir=output_dir(),
        release=release(),
    )
    slices, args = plan.slices, plan.args
    assert slices is not None  # require_slice
    scaling = slices.scaling_config(plan.min_slices, plan.resize_check_s)
    print(
        f"launcher: {slices.describe()}: {slices.num_workers} workers x "
        f"{slices.devices_per_host} devices = {slices.num_devices} devices",
        flush=True,
    )
    if plan.min_slices < slices.num_slices:
        print(
            f"launcher: elastic: runs on {plan.min_slices} to {slices.num_slices} slices "
            f"(checks for returned slices every {plan.resize_check_s:g}s); "
            + "; ".join(
                f"{s.slices} slices: global batch {s.global_batch:g}"
                + (f" ({', '.join(f'{k}={v}' for k, v in s.overrides.items())})")
                for s in plan.sizings.values()
            ),
            flush=True,
        )
    for line in plan.input_lines():
        print(f"launcher: {line}", flush=True)
    if (tiers := tier_plan(args)).memory_period is not None:
        print(f"launcher: {tiers.describe()}", flush=True)
    if args.get("enable_continuous_checkpointing"):
        print(
            "launcher: checkpoints: continuous (a save to the bucket as soon as the previous one "
            f"finished; the last {args.get('max_num_checkpoints_to_keep')} kept: "
            "--continuous_checkpointing=off saves every checkpoint_period steps and keeps all)",
            flush=True,
        )
    print("launcher: maxtext " + shlex.join(args.argv()[1:]), flush=True)
    if options.dry_run:
        print(
            json.dumps(
                {
                    "num_workers": scaling.num_workers,
                    "use_tpu": scaling.use_tpu,
                    "topology": scaling.topology,
                    "accelerator_type": scaling.accelerator_type,
                    "resources_per_worker": scaling.resources_per_worker,
                    "placement_strategy": scaling.placement_strategy,
                    "elastic_resize_monitor_interval_s": (
                        scaling.elastic_resize_monitor_interval_s
                    ),
                    "sizings": {n: asdict(s) for n, s in plan.sizings.items()},
                    "argv": args.argv(),
                    "worker_env": worker_env(plan),
                }
            )
        )
        return 0
    _ask_for_slices(slices.num_slices)
    return _fit(plan, options)


def _ask_for_slices(count: int) -> None:
    """On a release that gives idle slices back, asks for the job's slices before it starts."""
    idle = release().idle_release
    if idle is None:
        return
    from launcher.runtime.cluster.idle_release import ask_for
    from launcher.runtime.cluster.kube_api import KubeApi

    try:
        before = ask_for(KubeApi.in_cluster(), idle, count)
    except (OSError, LookupError, ValueError) as e:
        # Ray Train waits for the slices all the same; say what to do if they never come.
        print(
            f"launcher: could not ask for {count} slice(s) of {idle.cluster}/"
            f"{idle.group} ({e}); if none come, `kubectl patch raycluster {idle.cluster}` "
            f"its worker group's replicas to {count}",
            flush=True,
        )
        return
    if before is not None:
        print(
            f"launcher: asked for {count} slice(s) ({before} up): the release gave them back "
            "while idle; the job starts once GKE and KubeRay bring every host (minutes)",
            flush=True,
        )


def slice_trainer(
    plan: JobPlan,
    loop: Callable[[Any], None],
    loop_config: Any,
    name: str,
    policy: driver.Policy,
) -> Any:
    """A JaxTrainer that runs `loop(loop_config)` on every host of the planned slices (with
    jax.distributed set up across them; CPU devices where the slice is simulated)."""
    from ray.train.v2.jax import JaxTrainer

    from launcher.runtime.train.cpu_backend import CpuJaxConfig

    slices, args = plan.slices, plan.args
    assert slices is not None
    out_dir = str(args.get("base_output_directory"))
    env = worker_env(plan)
    shorten_group_start_wait(plan.min_slices, slices.num_slices, os.environ)
    return JaxTrainer(
        train_loop_per_worker=loop,
        train_loop_config=loop_config,
        scaling_config=slices.scaling_config(plan.min_slices, plan.resize_check_s),
        jax_config=CpuJaxConfig() if isinstance(slices, CpuSlices) else None,
        run_config=driver.run_config(name, out_dir, policy, env),
    )


def _fit(plan: JobPlan, options: JobOptions) -> int:
    from launcher.runtime.job.host import WorkerConfig
    from launcher.runtime.train.worker import train_loop_per_worker

    slices, args = plan.slices, plan.args
    assert slices is not None
    summary_key = driver.summary_key(plan.run_name)
    write_run_record(plan.run_dir.path, args)  # what `generate` rebuilds the model from
    gen = slices.shape.generation if isinstance(slices, TpuSlices) else None
    peak_tflops = gen.per_device(gen.peak_bf16_tflops) if gen else None
    labels = driver.metric_labels(options, plan.run_name, slices.name)
    trainer = slice_trainer(
        plan,
        train_loop_per_worker,
        WorkerConfig(
            argv=args.argv(),
            steps=int(args.get("steps")),
            summary_key=summary_key,
            # Each start reads what MaxText is told on the number of slices it got.
            hosts_per_slice=slices.hosts_per_slice,
            sizings=dict(plan.sizings),
            # MFU in the progress lines where the TPU table knows the peak: MaxText's TFLOP/s
            # are per device, and a tpu7x device is half a chip.
            peak_tflops=peak_tflops,
            metric_labels=labels,
            record_examples_in=str(plan.run_dir.path) if options.record_examples else None,
            hang_bound=HangBound(options.hang_timeout_s, options.hang_step_factor),
            run_dir=str(plan.run_dir.path),
        ),
        name=plan.run_name,
        policy=options,
    )
    return driver.drive(
        trainer,
        plan,
        summary_key,
        plan.run_dir,
        STARTED_AT,
        options,
        labels,
        int(plan.args.get("steps")),
        plan.args.get("jax_cache_dir") or "off",
    )


def _main(argv: Sequence[str]) -> int:
    """absl's main: the flags are parsed; read them once and go."""
    try:
        options = JobOptions.from_flags(FLAGS).with_release(release(), given_flags(FLAGS))
        return train(options, list(argv[1:]))
    except UsageError as e:
        return report(e, prog=f"{RUNTIME_PROG} train")


def run(argv: list[str]) -> None:
    """`python -m launcher.runtime train ARGS`: the absl app (absl's logging flags, --helpfull),
    then exits."""
    if {"-h", "--help", "--helpshort"} & set(argv):
        # absl's --help lists the main module's flags; ours live in core.job_plan.
        print(__doc__.strip() + "\n\nflags:\n" + FLAGS.module_help(job_plan.__name__))
        sys.exit(0)
    app.run(_main, argv=[f"{RUNTIME_PROG} train", *job_plan.spelled_as_defined(argv, FLAGS)])
