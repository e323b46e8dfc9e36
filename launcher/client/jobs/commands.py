"""The job commands a user runs on a workstation: demo, submit, preflight, logs, status, stop,
generate, export, import. Each adds its own parser and handler; requests are built by name here."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from launcher.client.cluster_options import add_history_options, add_where_options, verbose_default
from launcher.client.kube_context import add_kube_context_option
from launcher.client.release.values_presets import add_values_option
from launcher.client.workspace import LOCAL_BUCKET
from launcher.core.errors import UsageError
from launcher.core.gcs import BUCKET_FORMS
from launcher.core.job.frameworks import NAMES as FRAMEWORKS
from launcher.core.job.run_requests import (
    ExportRequest,
    GenerateRequest,
    ImportRequest,
    add_generation_options,
    add_run_options,
    job_args,
)
from launcher.core.package_version import doc

if TYPE_CHECKING:
    from launcher.core.job.plan import Job

# The demo: a tiny Llama-style model on the local simulated slice; each run trains 40 steps past
# the latest checkpoint, so a rerun resumes and goes on.
DEMO_JOB = ["--steps_beyond_checkpoint=40", "tiny-llama.yml", "run_name=demo"]
JOB_ARGS_HELP = (
    "-- then the job's arguments: the job's flags below, then MaxText's [config.yml] key=value"
)


def _submit_request(ns: argparse.Namespace, job: Job | None):
    from launcher.client.jobs.submit import SubmitRequest

    return SubmitRequest(
        job,
        address=ns.address,
        submission_id=ns.submission_id,
        no_wait=ns.no_wait,
        dry_run=ns.dry_run,
        release=ns.release,
        namespace=ns.namespace,
        values=tuple(ns.values),
        skip_preflight=ns.skip_preflight,
        verbose=ns.verbose,
        working_dir=ns.working_dir,
    )


def run_submit(ns: argparse.Namespace) -> int:
    if ns.framework == "torch":
        from launcher.client.jobs.torch_submit import submit_torch
        from launcher.core.job.torch_plan import TorchJobSpec

        return submit_torch(_submit_request(ns, None), TorchJobSpec.parse(job_args(ns.job_args)))
    from launcher.client.jobs.submit import submit
    from launcher.core.job.plan import parse_job_args

    return submit(_submit_request(ns, parse_job_args(job_args(ns.job_args))))


def run_demo(ns: argparse.Namespace) -> int:
    from launcher.client.jobs.submit import SubmitRequest, submit
    from launcher.client.local import cluster as local_cluster
    from launcher.core.job.plan import parse_job_args

    local_cluster.up(local_cluster.LocalClusterSpec(tpu=ns.tpu, num_slices=ns.num_slices))
    if ns.framework == "torch":
        from launcher.client.jobs.torch_submit import demo

        code = demo(ns.no_wait, ns.verbose, job_args(ns.maxtext_args))
        print(where_the_metrics_are())
        return code
    job = [*DEMO_JOB, *job_args(ns.maxtext_args)]
    code = submit(SubmitRequest(parse_job_args(job), no_wait=ns.no_wait, verbose=ns.verbose))
    print(where_the_metrics_are())
    return code


def where_the_metrics_are() -> str:
    from launcher.client.local import prometheus as local_prometheus
    from launcher.core.job.metrics import STEP

    if local_prometheus.is_ready():
        return (
            f"metrics:      {local_prometheus.address()}/graph?g0.expr={STEP.prometheus_name} "
            f"(every figure: {doc('metrics.md')}; the Grafana dashboard: tpu-launcher dashboard)"
        )
    return (
        "metrics:      in Ray's metrics agents; `make up` (tpu-launcher up --prometheus) starts "
        f"a Prometheus that scrapes them ({doc('metrics.md')})"
    )


def run_preflight(ns: argparse.Namespace) -> int:
    from launcher.client.jobs.slice_target import resolve_target
    from launcher.core.gcs import parse_bucket
    from launcher.core.job.plan import parse_job_args
    from launcher.preflight.command import PreflightRequest, preflight

    bucket = parse_bucket(ns.bucket) if ns.bucket else None  # refused before a release is read
    target = resolve_target(ns.values, ns.release, ns.namespace)
    request = PreflightRequest(
        parse_job_args(job_args(ns.job_args)),
        release=target.facts if target else None,
        target_source=target.source if target else None,
        bucket=bucket,
        data_dir=ns.data_dir,
        advise=ns.advise,
        max_batch=ns.max_batch,
        use_cache=not ns.no_cache,
    )
    if target is None and ns.data_dir is None:
        # A job for no release: the local cluster's, whose hosts see this directory's bucket
        # where it is.
        from launcher.client.data.commands import default_output_dir

        here = str(default_output_dir().resolve())
        request = dataclasses.replace(request, data_dir=here, hosts_data_dir=here)
    return preflight(request)


def run_on_job(ns: argparse.Namespace) -> int:
    from launcher.client.jobs.actions import act_on_job
    from launcher.client.jobs.history import history_at

    return act_on_job(
        ns.command,
        ns.job,
        ns.address,
        getattr(ns, "follow", False),
        release=ns.release,
        namespace=ns.namespace,
        raw=getattr(ns, "raw", False),
        wait=getattr(ns, "wait", False),
        as_json=getattr(ns, "json", False),
        history=history_at(getattr(ns, "bucket", None), getattr(ns, "data_dir", None)),
    )


def run_about_run(ns: argparse.Namespace) -> int:
    """generate, export or import: a job about a model, on the cluster that has its bucket."""
    from launcher.client.jobs.submit import SubmitRequest, submit_run_request

    where = SubmitRequest(
        None, address=ns.address, release=ns.release, namespace=ns.namespace, verbose=ns.verbose
    )
    request: GenerateRequest | ExportRequest | ImportRequest
    if ns.command == "generate" and ns.run is None:
        if not ns.release:
            raise UsageError(
                "--run",
                "names no trained run",
                "--run RUN (the run_name it was trained with), or --release R to ask a "
                "serving release's vLLM server",
            )
        from launcher.client.serve.served_model import Ask, generate

        ask = Ask(ns.prompt, ns.max_tokens, ns.temperature, ns.seed, ns.chat)
        return generate(ns.release, ns.namespace, ask)
    if ns.command == "generate":
        request = GenerateRequest.from_args(ns)
    elif ns.command == "export":
        request = ExportRequest.from_args(ns)
    else:
        request = ImportRequest.from_args(ns)
    return submit_run_request(request, where)


def _job_flags_epilog() -> str:
    from launcher.core.job.flags import job_flags_help

    return (
        "the job's flags (before MaxText's arguments; --max-failures and --max_failures alike):\n"
        + job_flags_help()
    )


def _submit_options(p: argparse.ArgumentParser) -> None:
    add_where_options(p)
    p.add_argument("--submission-id", help="job id (default <run_name>-<time>)")
    p.add_argument("--no-wait", action="store_true", help="return after submitting")
    p.add_argument("--dry-run", "--dry_run", action="store_true", help="print the commands only")
    add_values_option(p, "preflight the job for their slice, then bind the job to it")
    p.add_argument(
        "--skip-preflight",
        action="store_true",
        help="with --values/--release: submit without preflight (the job is still bound to "
        "the slice)",
    )
    p.add_argument(
        "--working-dir",
        help="a directory that travels with the job and is its working directory on every host "
        "(code, configs; at most 100 MiB). Without it, a MaxText config of your own travels alone",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "demo",
        help="train the tiny model on the local simulated slice (started if it is not running); "
        "run again to resume",
    )
    p.add_argument("--tpu", help="the simulated slice for a new local cluster (default v5p-16)")
    p.add_argument(
        "--num-slices",
        "--num_slices",
        type=int,
        default=1,
        help="simulated slices for a new local cluster (default 1; 2 or more: an elastic job)",
    )
    p.add_argument("--no-wait", action="store_true", help="return after submitting")
    p.add_argument(
        "--verbose",
        action="store_true",
        default=verbose_default(),
        help="show every line of the job live [env VERBOSE=1]",
    )
    p.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        default="jax",
        help="jax (default): MaxText's tiny Llama; torch: a tiny Llama in plain PyTorch, FSDP2, "
        "one process per chip (launcher/examples/torch_tiny_llama.py)",
    )
    p.add_argument(
        "maxtext_args",
        nargs=argparse.REMAINDER,
        help="-- then more MaxText key=value (with --framework torch: the example's arguments)",
    )
    p.set_defaults(func=run_demo)

    p = sub.add_parser(
        "submit",
        help="check a training job, submit it, follow it",
        epilog=_job_flags_epilog(),
        formatter_class=formatter,
    )
    _submit_options(p)
    p.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        default="jax",
        help="jax (default): a MaxText job, one process per host; torch: a PyTorch script, one "
        "process per chip (`-- [--run_name=NAME --max_failures=N] train.py [its arguments]`)",
    )
    p.add_argument("job_args", nargs=argparse.REMAINDER, help=JOB_ARGS_HELP)
    p.set_defaults(func=run_submit)

    p = sub.add_parser(
        "preflight",
        help="will the job fit the slice? (compiles for the TPU on CPU)",
        epilog=_job_flags_epilog(),
        formatter_class=formatter,
    )
    target = p.add_mutually_exclusive_group()
    add_values_option(target, "the slice to compile for")
    target.add_argument("--release", help="an installed release whose RayCluster names the slice")
    p.add_argument("--namespace", default="default", help="the release's namespace")
    add_kube_context_option(p)
    p.add_argument(
        "--bucket",
        metavar="BUCKET",
        help=f"the checkpoint bucket to check ({BUCKET_FORMS}): it exists, the job can write "
        "and list under the run's prefix, and the checkpoint a run would resume from",
    )
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="the bucket as this machine sees it (its gcsfuse mount, a copy, or the local "
        "cluster's bucket directory): the job's data (--data NAME, or grain files and a "
        "tokenizer under /data) is checked there before anything compiles. Default: with no "
        f"--values or --release, this directory's local bucket ({LOCAL_BUCKET}); else none, "
        "and preflight says what it did not check",
    )
    p.add_argument(
        "--advise",
        action="store_true",
        help="also search batch, remat policy and ICI split for the fastest configuration that "
        "fits (several compiles: minutes each for an 8B model, cold)",
    )
    p.add_argument(
        "--max-batch",
        type=int,
        default=None,
        metavar="N",
        help="with --advise: the largest per_device_batch_size to try (default: every batch "
        "the advice knows), e.g. to stay near the global batch your learning rate was tuned "
        "for; fewer, faster compiles",
    )
    p.add_argument("--no-cache", action="store_true", help="compile again, not from the cache")
    p.add_argument("job_args", nargs=argparse.REMAINDER, help=JOB_ARGS_HELP)
    p.set_defaults(func=run_preflight)

    for name, what in (("logs", "print"), ("status", "show"), ("stop", "stop")):
        q = sub.add_parser(name, help=f"{what} a job (default: the last one submitted from here)")
        q.add_argument("job", nargs="?", help="submission id")
        add_where_options(q, verbose=False)
        if name != "stop":
            add_history_options(q)
        if name == "logs":
            q.add_argument("--follow", action="store_true", help="go on printing as it runs")
            q.add_argument(
                "--raw",
                action="store_true",
                help="every line as Ray keeps it (default: what submit shows: the plan, "
                "progress, checkpoints, restarts and the summary); colour only on a terminal",
            )
        if name == "status":
            q.add_argument(
                "--wait",
                action="store_true",
                help="return when the job has ended: exit 0 succeeded, 1 failed, 3 stopped",
            )
            q.add_argument(
                "--json",
                action="store_true",
                help="one JSON object: list --json's fields, Ray's message, and the goodput "
                "breakdown in seconds once the job has its result line (else null)",
            )
        q.set_defaults(func=run_on_job)

    p = sub.add_parser(
        "generate",
        help="generate text from a run's latest checkpoint or an import, on the cluster's slice",
    )
    add_generation_options(p)
    add_where_options(p)
    p.set_defaults(func=run_about_run)
    p = sub.add_parser(
        "export", help="write a run's checkpoint as a Hugging Face model next to it, for vLLM"
    )
    add_run_options(p)
    add_where_options(p)
    p.set_defaults(func=run_about_run)
    p = sub.add_parser(
        "import",
        help="convert a Hugging Face model (Llama, Mistral, Qwen3, Qwen3-MoE, Mixtral; in the "
        "bucket or from the Hub) into MaxText's parameters (imports/NAME), which a job starts "
        "from with --from=NAME",
        description="The conversion runs as a job on the cluster, as a task on a host with the "
        f"memory it needs (twice the weights), checked first. {doc('fine-tuning.md')}",
    )
    p.add_argument(
        "source",
        metavar="SOURCE",
        help="the model's directory (config.json, *.safetensors, tokenizer) as the job sees "
        "it: relative to the bucket (hf/NAME for gs://BUCKET/hf/NAME) or absolute; or "
        "hf://ORG/NAME[@REVISION], downloaded by the job into the bucket (hf/ORG/NAME) with "
        "the chart's ray.hfToken",
    )
    p.add_argument("--name", required=True, help="the import's name: --from=NAME in a job")
    add_where_options(p)
    p.set_defaults(func=run_about_run)
