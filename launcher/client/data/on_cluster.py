"""`data prepare --release NAME` (or `--address URL`): the preparation as a Ray job on the
cluster (launcher.runtime.data.prepare), submitted over Ray's job API and followed as `submit`
follows a training job: its progress lines, then the dataset it made. SOURCE and --output-dir
are as the cluster's hosts see them; the output defaults to the release's bucket mount."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable

from launcher.core.data.shards import PrepareRequest
from launcher.core.errors import UsageError
from launcher.core.runtime_door import JOB_ENTRYPOINT

PREPARE_COMMAND = "prepare-data"  # the in-cluster command (launcher.runtime.commands)
# Where this machine talks to a Cloud Storage emulator (tests), the job's hosts do too.
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"


def entrypoint(request: PrepareRequest, parallelism: int | None, tpu_hosts: bool) -> list[str]:
    """The job's argument vector: the request travels as one JSON argument, never via a shell."""
    words = [*JOB_ENTRYPOINT, PREPARE_COMMAND, "--request", request.to_json()]
    words += ["--parallelism", str(parallelism)] if parallelism else []
    return words + (["--on-tpu-hosts"] if tpu_hosts else [])


def prepare_on_cluster(ns: argparse.Namespace, request_for: Callable[[str], PrepareRequest]) -> int:
    from launcher.client.jobs.submit import SubmitRequest, submit_entrypoint

    if ns.parallelism is not None and ns.parallelism < 1:
        raise UsageError("--parallelism", f"{ns.parallelism} tasks", "one or more, e.g. 8")
    with contextlib.ExitStack() as stack:
        if ns.release:
            from launcher.client.release.helm_release import Release, forwarded

            read = Release.read(ns.release, ns.namespace)
            mount = _bucket_mount(read)
            _check_source_is_theirs(ns.source, mount, ns.release)
            output = ns.output_dir or mount
            if not output:
                raise UsageError(
                    "--output-dir",
                    f"release {ns.release}'s head mounts no bucket (no gcsfuse volume)",
                    "say where its hosts write: --output-dir gs://BUCKET[/prefix]",
                )
            dashboard = stack.enter_context(forwarded(read, ns.namespace))
        else:
            from launcher.client.jobs.ray_api import resolve_dashboard

            if not ns.output_dir:
                raise UsageError(
                    "--output-dir",
                    f"the cluster at {ns.address} is not a release whose bucket mount is known",
                    "say where its hosts write: --output-dir gs://BUCKET[/prefix] or a path "
                    "they mount",
                )
            output, dashboard = ns.output_dir, resolve_dashboard(ns.address)
        request = request_for(output)
        env = {EMULATOR_ENV: os.environ[EMULATOR_ENV]} if os.environ.get(EMULATOR_ENV) else {}
        where = SubmitRequest(
            job=None,
            address=ns.address,
            release=ns.release,
            namespace=ns.namespace,
            verbose=ns.verbose,
        )
        return submit_entrypoint(
            where,
            f"prepare-{request.name}",
            dashboard,
            entrypoint(request, ns.parallelism, ns.on_tpu_hosts),
            title="prepare",
            env_vars=env,
        )


def _check_source_is_theirs(source: str | None, mount: str | None, release: str) -> None:
    """A release's hosts read gs:// or their bucket mount, never a path on this machine."""
    if not source or source.startswith("gs://"):
        return
    if mount and source.startswith(mount.rstrip("/") + "/"):
        return
    raise UsageError(
        "SOURCE",
        f"{source} is not where release {release}'s hosts can read: they read gs://..."
        + (f" or their bucket mount, {mount}" if mount else ""),
        f"copy it to the bucket first (gcloud storage cp -r {source} gs://BUCKET/raw/) and "
        "name it there, or prepare it here without --release",
    )


def _bucket_mount(read) -> str | None:  # read: a helm_release.Release
    mount = read.facts().bucket if read.raycluster else None
    return mount.mount if mount else None
