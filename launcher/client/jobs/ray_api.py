"""Ray's job API, spoken over HTTP with the standard library: the requests `ray job submit |
status | logs | stop | list` and Ray's JobSubmissionClient send to the dashboard, without Ray
installed on the workstation (Ray 2.60 has no wheel for macOS on x86_64, and a client needs
none of its runtime). The one Ray jobs client of the launcher.

Endpoints and bodies: ray/dashboard/modules/job/job_head.py and common.py (JobSubmitRequest),
ray/dashboard/modules/dashboard_sdk.py (a working directory is zipped, put at
/api/packages/gcs/_ray_pkg_<hash>.zip and named by that URI), Ray 2.60.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.core.errors import UsageError
from launcher.core.ray_auth import auth_headers


def default_address() -> str:
    """The local cluster's dashboard (this slot's: launcher.client.local.instance)."""
    from launcher.client.local.instance import local_instance

    return local_instance().dashboard_address


@dataclass(frozen=True)
class Dashboard:
    """A Ray dashboard to call: its address, and the token it asks for where the launcher read
    one (a release's, from KubeRay's Secret: launcher.client.release.helm_release.forwarded);
    without one, Ray's own search (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token). A token
    read goes to this address only, and never into this process's environment."""

    address: str
    token: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "address", self.address.rstrip("/"))

    def __str__(self) -> str:
        return self.address

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else auth_headers()


def resolve_dashboard(flag: str | None, acting: bool = False) -> Dashboard:
    """The dashboard a job command means: --address, Ray's variables, else this directory's
    local cluster (launcher.client.local.cluster.jobs_cluster_here; `acting`: submit, stop)."""
    for value in (flag, os.environ.get("RAY_API_SERVER_ADDRESS"), os.environ.get("RAY_ADDRESS")):
        if value:
            return Dashboard(value if "://" in value else f"http://{value}")
    from launcher.client.local.cluster import jobs_cluster_here

    return Dashboard(jobs_cluster_here(acting))


def check_reachable(
    dashboard: Dashboard, release: str | None = None, namespace: str = "default"
) -> None:
    """Fails fast, and clearly, when no Ray dashboard answers at its address (the port-forward
    to `release`'s head, when given)."""
    address = dashboard.address
    request = urllib.request.Request(f"{address}/api/version", headers=dashboard.headers())
    try:
        with urllib.request.urlopen(request, timeout=5):
            return
    except urllib.error.HTTPError as e:
        if e.code in (401, 403):
            raise UsageError(
                "address",
                f"the Ray dashboard at {address} refused the request ({e.code}): token "
                "authentication is on and no valid token was sent",
                "set RAY_AUTH_TOKEN (the chart's NOTES show how to read it), or use "
                "`--release <release>`, which reads it for you",
            ) from None
        return  # any other HTTP answer means a dashboard is there
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        if release:
            selector = f"ray.io/node-type=head,app.kubernetes.io/instance={release}"
            from launcher.client.kube_context import kubectl

            there = shlex.join(kubectl("-n", namespace))  # the cluster the command pinned
            raise UsageError(
                "release",
                f"release {release!r}'s Ray head does not answer through its port-forward "
                f"({address}: {reason})",
                f"check that its head pod is Running and Ray started in it: `{there} get pods "
                f"-l {selector}`, then `{there} logs <that pod>`",
            ) from None
        raise UsageError(
            "address",
            f"no Ray dashboard answers at {address} ({reason})",
            "start the local cluster with `tpu-launcher up`, pass --address http://host:8265, "
            "or --release <helm release> to port-forward a cluster's head",
        ) from None


# Ray's end states (ray.job_submission.JobStatus.is_terminal), each with the exit code
# `status --wait` ends with, as a script reads it.
ENDED = {"SUCCEEDED": 0, "FAILED": 1, "STOPPED": 3}
# Ray's prefix for a package it unpacks as a working directory (packaging.RAY_PKG_PREFIX).
PACKAGE_PREFIX = "_ray_pkg_"


class RayJobsError(RuntimeError):
    """The dashboard answered with an error: its status and its own text."""

    def __init__(self, what: str, status: int, text: str) -> None:
        super().__init__(f"{what}: the Ray dashboard answered {status}: {text.strip()[:2000]}")
        self.status = status


@dataclass(frozen=True)
class JobInfo:
    """What the dashboard says of one job (Ray's JobDetails, the fields the launcher reads)."""

    submission_id: str | None
    job_id: str | None
    status: str
    entrypoint: str
    message: str | None
    start_time: int | None  # milliseconds since the epoch
    end_time: int | None
    metadata: dict[str, str]
    driver_exit_code: int | None = None  # the entrypoint's own (2: it refused the job)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> JobInfo:
        return cls(
            d.get("submission_id"),
            d.get("job_id"),
            str(d.get("status", "")),
            d.get("entrypoint") or "",
            d.get("message"),
            d.get("start_time"),
            d.get("end_time"),
            d.get("metadata") or {},
            d.get("driver_exit_code"),
        )


def package_zip(directory: Path, skipped_dirs: Iterable[str] = ()) -> tuple[str, bytes]:
    """The directory's files zipped as Ray unpacks a working directory (paths relative to it),
    and the content-addressed package name Ray's own uploads use the form of."""
    skipped = set(skipped_dirs)
    files = sorted(
        p
        for p in directory.rglob("*")
        if p.is_file() and not skipped.intersection(p.relative_to(directory).parts)
    )
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, strict_timestamps=False) as zf:
        for path in files:
            name = path.relative_to(directory).as_posix()
            data = path.read_bytes()
            digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (path.stat().st_mode & 0o777) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return f"{PACKAGE_PREFIX}{digest.hexdigest()[:32]}.zip", buffer.getvalue()


class RayJobs:
    """The job API of a Ray dashboard, with its token (`Dashboard.headers`)."""

    def __init__(self, dashboard: Dashboard, timeout_s: float = 60.0) -> None:
        self.dashboard = dashboard
        self.address = dashboard.address
        self.timeout_s = timeout_s

    def _call(
        self, what: str, method: str, path: str, body: bytes | None = None, json_body: Any = None
    ) -> bytes:
        headers = self.dashboard.headers()
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(
            self.address + path, data=body, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return bytes(response.read())
        except urllib.error.HTTPError as e:
            raise RayJobsError(what, e.code, e.read().decode(errors="replace")) from None

    def version(self) -> str:
        return str(json.loads(self._call("version", "GET", "/api/version"))["ray_version"])

    def submit(
        self,
        entrypoint: list[str],
        submission_id: str,
        metadata: dict[str, str],
        runtime_env: dict[str, Any] | None = None,
    ) -> str:
        """Submits `entrypoint`, joined for the shell Ray runs it with as `ray job submit --`
        joins what follows it (shlex.join)."""
        body: dict[str, Any] = {
            "entrypoint": shlex.join(entrypoint),
            "submission_id": submission_id,
            "metadata": metadata,
        }
        if runtime_env:
            body["runtime_env"] = runtime_env
        answer = json.loads(self._call("submit the job", "POST", "/api/jobs/", json_body=body))
        return str(answer.get("submission_id") or answer.get("job_id"))

    def upload_directory(self, directory: Path, skipped_dirs: Iterable[str] = ()) -> str:
        """The directory as a package in the cluster's GCS (put once: its name is its content);
        returns the URI a runtime_env's working_dir names."""
        name, data = package_zip(directory, skipped_dirs)
        path = f"/api/packages/gcs/{name}"
        try:
            self._call("find the job's files", "GET", path)
        except RayJobsError as e:
            if e.status != 404:
                raise
            self._call("upload the job's files", "PUT", path, body=data)
        return f"gcs://{name}"

    def info(self, job_id: str) -> JobInfo | None:
        """The job, or None when the cluster has no job of that id."""
        try:
            raw = self._call(f"read job {job_id}", "GET", f"/api/jobs/{_quote(job_id)}")
        except RayJobsError as e:
            if e.status == 404:
                return None
            raise
        return JobInfo.from_json(json.loads(raw))

    def status(self, job_id: str) -> str:
        info = self.info(job_id)
        if info is None:
            raise RayJobsError(f"read job {job_id}", 404, f"Job {job_id} does not exist")
        return info.status

    def jobs(self) -> list[JobInfo]:
        return [JobInfo.from_json(d) for d in json.loads(self._call("list", "GET", "/api/jobs/"))]

    def logs(self, job_id: str) -> str:
        raw = self._call(f"read job {job_id}'s log", "GET", f"/api/jobs/{_quote(job_id)}/logs")
        return str(json.loads(raw).get("logs", ""))

    def stop(self, job_id: str) -> bool:
        """Asks the job to stop; False when it had ended already."""
        raw = self._call(f"stop job {job_id}", "POST", f"/api/jobs/{_quote(job_id)}/stop")
        return bool(json.loads(raw).get("stopped"))


def _quote(job_id: str) -> str:
    return urllib.parse.quote(job_id, safe="")
