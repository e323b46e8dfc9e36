"""`tpu-launcher`: the one command, in the cluster and on a workstation.

    tpu-launcher submit [--address URL | --release R] [--values F] -- [job args]
    tpu-launcher logs|status|stop [JOB]
    tpu-launcher up|down|local-status        the local Ray cluster (a simulated TPU slice)
    tpu-launcher slice-down|slice-up N       take a simulated slice away (preempted), give it back
    tpu-launcher preflight --values F -- [job args]
    tpu-launcher train [job args]            the JaxTrainer entrypoint (in the cluster)
    tpu-launcher generate --run R --prompt P text from a run's checkpoint (submits `decode`)
    tpu-launcher export --run R              the checkpoint as a Hugging Face model (`convert`)
    tpu-launcher sax publish|generate|list|unpublish --model M   Saxml's HTTP API
    tpu-launcher gke plan|up|down --values F GKE: cluster, pools, registry, image, bucket, IAM
    tpu-launcher image|install --values F    the release's image, built and pushed; the release
    tpu-launcher list                        the cluster's jobs

Job args are the launcher's flags (`tpu-launcher train --help`) followed by MaxText's
`[config.yml] key=value ...`. Options are parsed here, once, into each command's request;
errors raised below become exit codes only here: 2 for a usage error (with the fix), the
failed command's code for an external command, 1 for a failed job.
"""

from __future__ import annotations

import argparse
import os
import sys

from launcher.core.errors import CommandError, UsageError, report

# Subcommands handed their arguments unparsed: absl parses `train`'s own flags.
_PASS_THROUGH = {"train"}


def _job_args(values: list[str]) -> list[str]:
    return values[1:] if values[:1] == ["--"] else values


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tpu-launcher",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Job args: the launcher's flags (see `tpu-launcher train --help`), then MaxText's "
        "[config.yml] key=value ...",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("submit", help="check a training job, submit it, follow it")
    p.add_argument(
        "--address",
        help="Ray dashboard URL (default: RAY_API_SERVER_ADDRESS, "
        "RAY_ADDRESS, then the local cluster)",
    )
    p.add_argument("--submission-id", help="job id (default <run_name>-<time>)")
    p.add_argument("--no-wait", action="store_true", help="return after submitting")
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    p.add_argument(
        "--release",
        help="a tpu-stack Helm release: port-forward its head, send its "
        "token, and preflight for its slice",
    )
    p.add_argument("--namespace", default="default", help="the release's namespace")
    p.add_argument("--values", help="a chart values file: preflight the job for its slice first")
    p.add_argument(
        "--skip-preflight",
        action="store_true",
        help="submit without preflight even with --values/--release",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        default=os.environ.get("VERBOSE", "") not in ("", "0"),
        help="show every line of the job live (default: the plan, progress, checkpoints, "
        "restarts and the summary; the whole log goes to a file) [env VERBOSE=1]",
    )
    p.add_argument(
        "--working-dir",
        help="a directory that travels with the job and is its working directory on every host "
        "(code, configs; at most 100 MiB). Without it, a MaxText config of your own travels alone",
    )
    p.add_argument("job_args", nargs=argparse.REMAINDER, help="-- then the job's arguments")

    for name, what in (("logs", "print"), ("status", "show"), ("stop", "stop")):
        q = sub.add_parser(name, help=f"{what} a job (default: the last one submitted from here)")
        q.add_argument("job", nargs="?", help="submission id")
        q.add_argument("--address")
        q.add_argument("--release", help="a tpu-stack Helm release: port-forward its head")
        q.add_argument("--namespace", default="default", help="the release's namespace")
        if name == "logs":
            q.add_argument("--follow", action="store_true")

    p = sub.add_parser(
        "generate",
        help="generate text from a run's latest checkpoint, on the cluster's slice",
    )
    _generation_options(p)
    _target_options(p)
    p = sub.add_parser(
        "decode", help="generate's job: MaxText's inference engine on the slice (in the cluster)"
    )
    _generation_options(p)
    p = sub.add_parser(
        "export",
        help="write a run's checkpoint as a Hugging Face model next to it, for vLLM",
    )
    _run_options(p)
    _target_options(p)
    p = sub.add_parser("convert", help="export's job: the conversion (in the cluster)")
    _run_options(p)
    p = sub.add_parser("sax", help="Saxml's HTTP server: publish, generate, list, unpublish")
    p.add_argument("action", choices=["publish", "generate", "list", "unpublish"])
    p.add_argument("--model", required=True, help="the Sax model name, /sax/<cell>/<model>")
    p.add_argument("--model-path", help="publish: the Saxml model class")
    p.add_argument("--checkpoint", help="publish: its checkpoint (default: None, random weights)")
    p.add_argument("--replicas", type=int, default=1, help="publish: model server replicas")
    p.add_argument("--query", help="generate: the prompt")
    p.add_argument("--url", help="the HTTP server, http://host:8888 (else --release)")
    p.add_argument("--release", help="a release with serving.engine=saxml: port-forward it")
    p.add_argument("--namespace", default="default")
    p.add_argument("--dry-run", action="store_true", help="print the request only")

    p = sub.add_parser(
        "preflight", help="will the job fit the slice? (compiles for the TPU on CPU)"
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument("--values", help="a chart values file naming the slice")
    target.add_argument("--release", help="an installed release whose RayCluster names the slice")
    p.add_argument("--namespace", default="default")
    p.add_argument(
        "--bucket", help="gs://bucket/prefix to check (exists, writable, latest checkpoint)"
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
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("job_args", nargs=argparse.REMAINDER, help="-- then the job's arguments")

    p = sub.add_parser("up", help="start the local Ray cluster (a simulated TPU slice on CPU)")
    p.add_argument(
        "--tpu",
        help="the simulated slice, as Cloud TPU names it (default v5p-16: 2 "
        "hosts x 4 chips); each host's chips are CPU devices",
    )
    p.add_argument("--accelerator", help="long form: TPU generation (with --topology)")
    p.add_argument("--topology", help="long form: the slice's topology")
    p.add_argument("--num-slices", type=int, default=1)
    p.add_argument("--cpu-hosts", type=int, help="a CPU-only slice of this many hosts instead")
    p.add_argument("--cpu-devices-per-host", type=int, default=2)
    p.add_argument(
        "--bucket-dir",
        default=".local/bucket",
        help="directory that stands for the mounted checkpoint bucket",
    )
    p.add_argument("--object-store-mb", type=int, default=256)
    p.add_argument("--dry-run", action="store_true")
    p = sub.add_parser("down", help="stop the local Ray cluster")
    p.add_argument("--dry-run", action="store_true")
    sub.add_parser("local-status", help="exit 0 when the local Ray cluster answers")
    for name, what in (
        ("slice-down", "kill a simulated slice's hosts, as a preemption does"),
        ("slice-up", "start a simulated slice's hosts again"),
    ):
        p = sub.add_parser(name, help=what)
        p.add_argument("slice", type=int, help="the slice's index (0 .. slices - 1)")

    sub.add_parser(
        "train",
        add_help=False,
        help="the JaxTrainer entrypoint: run the job on the Ray cluster it is in",
    )
    p = sub.add_parser(
        "cluster-check", help="helm test's check: the Ray head answers and every host joined"
    )
    p.add_argument("--address", required=True)
    p.add_argument("--expect-nodes", type=int, required=True, help="head + workers")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument(
        "--ray-cluster", help="also check the TPU webhook's work on this RayCluster's pods"
    )
    p = sub.add_parser(
        "serving-check", help="helm test's check of vLLM: the model is listed and answers"
    )
    p.add_argument("--url", required=True, help="the OpenAI-compatible endpoint")
    p.add_argument("--model", required=True, help="the served model name")
    p.add_argument("--timeout", type=float, default=300)
    from launcher.client import gke_commands, job_list

    gke_commands.add_parsers(sub)
    job_list.add_parser(sub)
    p = sub.add_parser("tpu-table", help="print the TPU table (--json: the chart's copy)")
    p.add_argument("--json", action="store_true")
    return parser


def _target_options(p: argparse.ArgumentParser) -> None:
    """Where a job about a trained run is submitted (as for submit)."""
    p.add_argument("--address", help="Ray dashboard URL (default: as for submit)")
    p.add_argument("--release", help="a tpu-stack Helm release: port-forward its head")
    p.add_argument("--namespace", default="default", help="the release's namespace")
    p.add_argument(
        "--verbose",
        action="store_true",
        default=os.environ.get("VERBOSE", "") not in ("", "0"),
        help="show every line of the job live [env VERBOSE=1]",
    )


def _run_options(p: argparse.ArgumentParser) -> None:
    """Which trained run and checkpoint, and the model keys over the run's own."""
    p.add_argument("--run", required=True, help="the run_name it was trained with")
    p.add_argument("--step", type=int, help="the checkpoint (default: the latest committed)")
    p.add_argument(
        "maxtext_args",
        nargs=argparse.REMAINDER,
        help="-- then MaxText key=value over the run's own (or its whole config, first, "
        "for a run trained elsewhere)",
    )


def _generation_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt", required=True, help="the text to continue")
    p.add_argument("--max-tokens", type=int, default=32, help="tokens to generate")
    p.add_argument("--seed", type=int, default=0, help="the same seed generates the same text")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature; 0: greedy")
    _run_options(p)


def _generate_request(ns: argparse.Namespace):
    from launcher.core.run_requests import GenerateRequest

    return GenerateRequest(
        ns.run,
        ns.prompt,
        max_tokens=ns.max_tokens,
        seed=ns.seed,
        temperature=ns.temperature,
        step=ns.step,
        maxtext_argv=_job_args(ns.maxtext_args),
    )


def _export_request(ns: argparse.Namespace):
    from launcher.core.run_requests import ExportRequest

    return ExportRequest(ns.run, step=ns.step, maxtext_argv=_job_args(ns.maxtext_args))


def _dispatch(ns: argparse.Namespace) -> int:
    if ns.command == "submit":
        from launcher.client.ray_jobs import SubmitRequest, submit, use_token_if_present

        use_token_if_present()
        return submit(
            SubmitRequest(
                _job_args(ns.job_args),
                address=ns.address,
                submission_id=ns.submission_id,
                no_wait=ns.no_wait,
                dry_run=ns.dry_run,
                release=ns.release,
                namespace=ns.namespace,
                values=ns.values,
                skip_preflight=ns.skip_preflight,
                verbose=ns.verbose,
                working_dir=ns.working_dir,
            )
        )
    if ns.command in ("generate", "export"):
        from launcher.client.ray_jobs import (
            SubmitRequest,
            submit_run_request,
            use_token_if_present,
        )

        use_token_if_present()
        target = SubmitRequest(
            [], address=ns.address, release=ns.release, namespace=ns.namespace, verbose=ns.verbose
        )
        request = _generate_request(ns) if ns.command == "generate" else _export_request(ns)
        return submit_run_request(request, target)
    if ns.command == "decode":
        from launcher.runtime.generate import generate as decode

        return decode(_generate_request(ns))
    if ns.command == "convert":
        from launcher.runtime.hf_export import export

        return export(_export_request(ns))
    if ns.command == "sax":
        from launcher.client.saxml_http import SaxRequest, sax

        request = SaxRequest(
            ns.action, ns.model, ns.model_path, ns.checkpoint, ns.replicas, ns.query
        )
        return sax(request, ns.url, ns.release, ns.namespace, ns.dry_run)
    if ns.command in ("logs", "status", "stop"):
        from launcher.client.ray_jobs import act_on_job, use_token_if_present

        use_token_if_present()
        return act_on_job(
            ns.command,
            ns.job,
            ns.address,
            getattr(ns, "follow", False),
            release=ns.release,
            namespace=ns.namespace,
        )
    if ns.command == "preflight":
        from launcher.preflight.command import PreflightRequest, preflight

        return preflight(
            PreflightRequest(
                _job_args(ns.job_args),
                values=ns.values,
                release=ns.release,
                namespace=ns.namespace,
                bucket=ns.bucket,
                advise=ns.advise,
                max_batch=ns.max_batch,
                use_cache=not ns.no_cache,
            )
        )
    if ns.command in ("slice-down", "slice-up"):
        from launcher.client import local_cluster

        if ns.command == "slice-down":
            local_cluster.slice_down(ns.slice)
        else:
            local_cluster.slice_up(ns.slice)
        return 0
    if ns.command in ("up", "down", "local-status"):
        from launcher.client import local_cluster

        if ns.command == "up":
            local_cluster.up(
                local_cluster.LocalClusterSpec(
                    ns.tpu,
                    ns.accelerator,
                    ns.topology,
                    ns.num_slices,
                    ns.cpu_hosts,
                    ns.cpu_devices_per_host,
                    ns.bucket_dir,
                    ns.object_store_mb,
                    ns.dry_run,
                )
            )
            return 0
        if ns.command == "down":
            local_cluster.down(ns.dry_run)
            return 0
        return local_cluster.status()
    if ns.command == "cluster-check":
        from launcher.runtime.cluster_check import check

        return check(ns.address, ns.expect_nodes, ns.timeout, ns.ray_cluster)
    if ns.command == "serving-check":
        from launcher.runtime.serving_check import check as serving_check

        return serving_check(ns.url, ns.model, ns.timeout)
    if ns.command == "tpu-table":
        from launcher.core.tpu_table import print_table

        print_table(as_json=ns.json)
        return 0
    raise AssertionError(ns.command)


def main(argv: list[str] | None = None) -> int:
    """Runs one subcommand; returns its exit code (the console script exits with it)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] and argv[0] in _PASS_THROUGH:
        from launcher.runtime.entrypoint import run

        run(argv[1:])  # an absl app: exits itself
    ns = _parser().parse_args(argv)
    prog = " ".join(
        ["tpu-launcher", ns.command, *([ns.gke_command] if ns.command == "gke" else [])]
    )
    try:
        return ns.func(ns) if hasattr(ns, "func") else _dispatch(ns)
    except (UsageError, CommandError) as e:
        return report(e, prog=prog)


def console_main() -> None:
    sys.exit(main())
