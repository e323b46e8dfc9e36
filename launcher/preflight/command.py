"""Preflight: will this MaxText job fit and run on that slice? Answered on a CPU workstation,
before anyone pays for a TPU-hour.

    tpu-launcher preflight --values values/v6e-16.yaml [--bucket gs://b[/prefix]] [--advise] \
        -- [launcher flags] base.yml model_name=llama3-8b run_name=r per_device_batch_size=1 ...

The job's arguments are the same as `tpu-launcher submit`'s. The target slice is resolved by
the caller (a values file's, an installed release's) and handed in, or is the job's own --tpu.
The training step is compiled ahead of time for that TPU topology (see compile_engine) and its
per-chip memory set against the chip's HBM from the TPU table, and the save a preemption
notice starts against the workers' grace period (see save_estimate). With --bucket it also
checks the bucket (see bucket_check); with --data-dir (the bucket mounted or copied here) the
job's data (--data or MaxText's own keys), before anything compiles (see data_checks); with
--advise it searches batch, remat policy and ICI split for the fastest configuration that
fits, predicted by a step model calibrated on published runs (see sharding_advice).
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.errors import UsageError
from launcher.core.gcs import Bucket
from launcher.core.job.checkpoint_tiers import tier_plan
from launcher.core.job.plan import Job, JobPlan, plan_job
from launcher.core.job.run_dir import DEFAULT_OUTPUT_DIR
from launcher.core.release_facts import NO_RELEASE, ReleaseFacts
from launcher.core.tpu.preemption import DEFAULT_GRACE_S
from launcher.core.tpu.slices import TpuSlices
from launcher.preflight.compile_engine import compile_report
from launcher.preflight.memory_report import refuse_if_too_big
from launcher.preflight.save_estimate import estimate_save


@dataclass(frozen=True)
class PreflightRequest:
    """`tpu-launcher preflight`'s options, read once."""

    job: Job
    # The job as the caller planned it for `target` (submit's, made once): None, planned here.
    plan: JobPlan | None = None
    # What the release the job is meant for tells it (a values file's, an installed one's): its
    # slices are the target; None: the job's own slice, for no release.
    release: ReleaseFacts | None = None
    target_source: str | None = None  # where it came from ("release tpu"); None: the job's own
    bucket: Bucket | None = None  # checked: exists, writable and listable under the run
    data_dir: str | None = None  # the bucket seen here (a mount, a copy): the job's data checked
    hosts_data_dir: str = DEFAULT_OUTPUT_DIR  # where the job's hosts see it (GKE: the mount)
    advise: bool = False
    max_batch: int | None = None  # the advice's largest per_device_batch_size
    use_cache: bool = True

    @property
    def target(self) -> TpuSlices | None:
        return self.release.slices if self.release else None

    @property
    def grace_seconds(self) -> int | None:
        """The workers' seconds to save on a notice (None: none); the chart's default where
        the job is meant for no release."""
        return self.release.grace_seconds if self.release else DEFAULT_GRACE_S


def _names_data(job: Job) -> bool:
    """The job reads a dataset or a model from the bucket (--data, --from, MaxText's own keys)."""
    keys = ("grain_train_files=", "grain_eval_files=", "tokenizer_path=/", "load_parameters_path=")
    named = any(word.startswith(keys) for word in job.maxtext_argv)
    return bool(job.options.data or job.options.from_ or named)


def preflight(request: PreflightRequest) -> int:
    """Prints the reports; raises UsageError when the job is wrong for the slice or too big."""
    target, release = request.target, request.release or NO_RELEASE
    if target is None and request.target_source:  # a release on a CPU cluster: submit goes on
        print(f"preflight: {request.target_source} has no TPU worker group: nothing to compile for")
        return 0
    plan = request.plan
    if plan is None:
        plan = plan_job(
            request.job.with_release(release),
            list(request.job.maxtext_argv),
            target=target,
            data_root=request.data_dir,
            hosts_data_root=request.hosts_data_dir if request.data_dir else None,
            release=release,
        )
    if request.data_dir:
        print(f"preflight: the job's data checked in {request.data_dir}")
    elif _names_data(request.job):
        print(
            "preflight: the job's data is not checked here: it is in the release's bucket, "
            "which preflight reads through --data-dir (its gcsfuse mount, or a copy of the "
            "dataset's manifest); the job's head checks it before any host starts"
        )
    for line in plan.input_lines():
        print(f"preflight: {line}")
    if request.job.options.from_ and plan.base_model is None:
        # The shape is in the import's or the run's record in the bucket: compiling the
        # config's own model would check another model.
        print(
            f"preflight: --from={request.job.options.from_}: the model's shape is in its record "
            "in the bucket, not seen here: not compiled (give preflight --data-dir, the "
            "bucket's gcsfuse mount or a copy of its records, to compile it); the job's hosts "
            "read it when it starts"
        )
        return 0
    slices = plan.slices
    if not isinstance(slices, TpuSlices):
        raise UsageError(
            "values",
            "preflight needs a TPU slice to compile for",
            "pass --values values/<slice>.yaml or --release <release>, or name the slice in "
            "the job's arguments (--tpu=v6e-16)",
        )
    if request.bucket:
        from launcher.preflight.bucket_check import check_bucket

        print(check_bucket(request.bucket, plan.run_name).render())
    report = compile_report(
        plan.args, slices, use_cache=request.use_cache, libtpu_flags=plan.libtpu_init_args
    )
    print(report.render())
    grace_source = request.target_source or "the chart's default"
    save = estimate_save(report, slices, request.grace_seconds, grace_source, release.capacities)
    tiers = tier_plan(plan.args)
    if save is not None:
        print(save.render())
        print(save.render_tiers(tiers, release.host_memory))
    if request.advise:
        from launcher.preflight import sharding_advice
        from launcher.preflight.advice_report import render as render_advice

        advice = sharding_advice.advise(
            plan.args,
            slices,
            use_cache=request.use_cache,
            given=report,
            max_batch=request.max_batch,
            job_flags=plan.libtpu_init_args,
        )
        print(render_advice(advice, request.job))
    refuse_if_too_big(report)
    if (
        save is not None
        and tiers.memory_period is not None
        and (refusal := release.host_memory.refusal(save.gib_per_host))
    ):
        raise refusal
    return 0
