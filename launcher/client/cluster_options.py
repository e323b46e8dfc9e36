"""Which Ray cluster a command acts on, declared once for every command that takes one:
`--address URL`, `--release NAME` (its head port-forwarded, its token sent), else the local
cluster; and the job's `--verbose`."""

from __future__ import annotations

import argparse
import os

from launcher.client.kube_context import add_kube_context_option


def verbose_default() -> bool:
    """--verbose's default: VERBOSE=1 in the environment."""
    return os.environ.get("VERBOSE", "") not in ("", "0")


def add_where_options(p: argparse.ArgumentParser, verbose: bool = True) -> None:
    """Which Ray cluster: an address, a release (port-forwarded), else the local one."""
    p.add_argument(
        "--address",
        help="Ray dashboard URL (default: RAY_API_SERVER_ADDRESS, RAY_ADDRESS, then the local "
        "cluster)",
    )
    p.add_argument(
        "--release", help="a tpu-stack Helm release: port-forward its head and send its token"
    )
    p.add_argument("--namespace", default="default", help="the release's namespace")
    add_kube_context_option(p)  # the release's cluster
    if verbose:
        p.add_argument(
            "--verbose",
            action="store_true",
            default=verbose_default(),
            help="show every line of the job live (default: the plan, progress, checkpoints, "
            "restarts and the summary; the whole log goes to a file) [env VERBOSE=1]",
        )


def add_history_options(p: argparse.ArgumentParser) -> None:
    """--bucket or --data-dir: the job's history read from the bucket, not the Ray cluster."""
    from launcher.core.gcs import BUCKET_FORMS
    from launcher.core.job.history import JOBS_SUBDIR

    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--bucket",
        metavar="BUCKET",
        help="read the job's history from the bucket, not the Ray cluster (which may be gone): "
        f"{BUCKET_FORMS}, the root the job wrote its runs under; each job keeps "
        f"<run>/{JOBS_SUBDIR}/<id>/",
    )
    where.add_argument(
        "--data-dir",
        metavar="DIR",
        help="the same, from the bucket as this machine sees it: the local cluster's bucket "
        "directory, or a gcsfuse mount",
    )
