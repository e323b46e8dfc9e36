"""`python -m launcher.runtime COMMAND`: the cluster's own door, what the chart's pods and the
jobs `tpu-launcher` submits run there, never a user at a workstation. `train` is the JaxTrainer
entrypoint (absl parses its flags) and `train-torch` the TorchTrainer's (the script's words reach
no parser of ours); `decode`, `convert`, `hf-import` and `prepare-data` are the jobs `generate`,
`export`, `import` and `data prepare` submit; the checks are `helm test`'s; `preemption-notice`
and `idle-release` the worker's preStop hook and the head's sidecar.

Errors end as on the workstation: 2 for a usage error (with the fix, also in the pod's
termination message), the failed command's code for an external command."""

from __future__ import annotations

import argparse
import sys

from launcher.core.errors import CommandError, UsageError, report
from launcher.core.job.frameworks import JAX
from launcher.core.job.run_requests import (
    TORCH_TRAIN,
    ExportRequest,
    GenerateRequest,
    ImportRequest,
    add_generation_options,
    add_run_options,
)
from launcher.core.runtime_door import RUNTIME_PROG
from launcher.core.tpu.preemption import NOTICE_COMMAND


def run_decode(ns: argparse.Namespace) -> int:
    from launcher.runtime.models.generate import generate

    return generate(GenerateRequest.from_args(ns))


def run_convert(ns: argparse.Namespace) -> int:
    from launcher.runtime.models.hf_export import export

    return export(ExportRequest.from_args(ns))


def run_hf_import(ns: argparse.Namespace) -> int:
    from launcher.runtime.models.hf_import import import_model

    return import_model(ImportRequest(ns.name, ns.source))


def run_prepare_data(ns: argparse.Namespace) -> int:
    from launcher.core.data.datasets import dataset_dir, describe_manifest
    from launcher.core.data.shards import PrepareRequest
    from launcher.core.job.events import format_summary_title
    from launcher.runtime.data.prepare import prepare_on_ray

    request = PrepareRequest.from_json(ns.request)
    if not request.source:  # the project's own corpus, where this host has the package
        from dataclasses import replace

        from launcher.corpus import shipped

        request = replace(request, source=str(shipped(len(request.fields) > 1)))
    manifest = prepare_on_ray(request, ns.parallelism, ns.on_tpu_hosts)
    print("\n" + format_summary_title("prepare"), flush=True)
    where = dataset_dir(str(request.output_dir), request.name)
    print(describe_manifest(manifest, where), flush=True)
    return 0


def run_cluster_check(ns: argparse.Namespace) -> int:
    from launcher.runtime.cluster.check import check

    return check(ns.address, ns.expect_nodes, ns.timeout, ns.ray_cluster)


def run_serving_check(ns: argparse.Namespace) -> int:
    from launcher.runtime.cluster.serving_check import check

    return check(ns.url, ns.model, ns.timeout)


def run_idle_release(ns: argparse.Namespace) -> int:
    from launcher.core.errors import UsageError
    from launcher.core.release_facts import RELEASE_ENV, ReleaseFacts
    from launcher.runtime.cluster.idle_release import watch
    from launcher.runtime.cluster.kube_api import KubeApi

    release = ReleaseFacts.from_env().idle_release
    if release is None:
        raise UsageError(
            RELEASE_ENV,
            "not set: this runs beside the head of a release that gives idle slices back",
            "--set ray.worker.tpu.releaseIdleAfterSeconds=1800 (the chart sets it)",
        )
    watch(KubeApi.in_cluster(), release)
    return 0


def run_preemption_notice(ns: argparse.Namespace) -> int:
    from launcher.runtime.train.preemption import notice_from_pod

    return notice_from_pod(ns.grace)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=RUNTIME_PROG,
        description=(__doc__ or "").split("\n\nErrors")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # For --help and the command words only: main hands these their arguments unparsed.
    sub.add_parser(
        JAX.command,
        add_help=False,
        help="the JaxTrainer entrypoint: run the job on the Ray cluster it is in (its flags: "
        f"`{RUNTIME_PROG} train --help`)",
    )
    sub.add_parser(
        TORCH_TRAIN,
        add_help=False,
        help="the TorchTrainer entrypoint: a PyTorch script on every chip "
        f"(`{RUNTIME_PROG} train-torch --help`)",
    )
    p = sub.add_parser("decode", help="generate's job: MaxText's inference engine")
    add_generation_options(p)
    p.set_defaults(func=run_decode)
    p = sub.add_parser("convert", help="export's job: the conversion")
    add_run_options(p)
    p.set_defaults(func=run_convert)
    p = sub.add_parser(
        "hf-import",
        help="import's job: the conversion, on a host with the memory",
    )
    p.add_argument("--name", required=True, help="the import's name under imports/")
    p.add_argument("--source", required=True, help="the Hugging Face model directory")
    p.set_defaults(func=run_hf_import)

    p = sub.add_parser(
        "prepare-data",
        help="data prepare's job: Ray Data over the cluster's CPU hosts",
    )
    p.add_argument("--request", required=True, help="the prepare request, as JSON")
    p.add_argument("--parallelism", type=int, help="tasks at once (default: as many as fit)")
    p.add_argument("--on-tpu-hosts", action="store_true", help="TPU slices' hosts work too")
    p.set_defaults(func=run_prepare_data)

    p = sub.add_parser(
        NOTICE_COMMAND,
        help="a worker pod's preStop hook: drain its Ray node for preemption "
        "with the grace period as the deadline, then wait it out",
    )
    p.add_argument("--grace", type=int, required=True, help="the pod's grace period, seconds")
    p.set_defaults(func=run_preemption_notice)
    p = sub.add_parser(
        "idle-release",
        help="beside the head: give the TPU slices back after a quiet "
        "period with no job (ray.worker.tpu.releaseIdleAfterSeconds)",
    )
    p.set_defaults(func=run_idle_release)
    p = sub.add_parser(
        "cluster-check",
        help="helm test: the Ray head answers and every host joined",
    )
    p.add_argument("--address", required=True, help="the Ray dashboard URL of the head")
    p.add_argument(
        "--expect-nodes", type=int, required=True, help="at least this many: head + workers"
    )
    p.add_argument(
        "--timeout", type=float, default=300, help="seconds to wait for them (default 300)"
    )
    p.add_argument(
        "--ray-cluster", help="also check the TPU webhook's work on this RayCluster's pods"
    )
    p.set_defaults(func=run_cluster_check)
    p = sub.add_parser(
        "serving-check",
        help="helm test of vLLM: the model is listed and answers",
    )
    p.add_argument("--url", required=True, help="the OpenAI-compatible endpoint")
    p.add_argument("--model", required=True, help="the served model name")
    p.add_argument(
        "--timeout", type=float, default=300, help="seconds to wait for it (default 300)"
    )
    p.set_defaults(func=run_serving_check)
    for listed in sub._choices_actions:  # each command's --help opens with what it is
        sub.choices[listed.dest].description = listed.help
    return top


def main(argv: list[str] | None = None) -> int:
    """Runs one of the cluster's commands; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == [JAX.command]:
        from launcher.runtime.train.entrypoint import run

        run(argv[1:])  # an absl app: exits itself
    if argv[:1] == [TORCH_TRAIN]:
        from launcher.runtime.torch.entrypoint import run as run_torch

        return run_torch(argv[1:])
    ns = parser().parse_args(argv)
    try:
        return ns.func(ns)
    except (UsageError, CommandError) as e:
        return report(e, prog=f"{RUNTIME_PROG} {ns.command}")
