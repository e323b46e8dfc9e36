"""`make submit` and friends: a thin wrapper over `ray job submit|logs|status|stop`.

    tpu-launcher submit [--address URL] [--submission-id ID] [--no-wait] -- [launcher flags]
        [maxtext config.yml] key=value ...

The address comes from --address, then RAY_API_SERVER_ADDRESS, then RAY_ADDRESS, then the local
cluster. The MaxText arguments are checked here first, so a typo fails in a second on your
machine instead of minutes later in the cluster. Submit follows the logs and exits 1 when the
job fails or is stopped; --no-wait returns after submission.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from launcher.commands import run
from launcher.errors import UsageError, exit_with

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
# The last submission id, so `make logs|status|stop` need no JOB=.
STATE_FILE = Path(os.environ.get("LAUNCHER_STATE_DIR", ".local")) / "last-submission"
ENTRYPOINT = ["python", "-m", "launcher.train"]


def resolve_address(flag: str | None) -> str:
    for value in (flag, os.environ.get("RAY_API_SERVER_ADDRESS"), os.environ.get("RAY_ADDRESS")):
        if value:
            return value if "://" in value else f"http://{value}"
    return DEFAULT_ADDRESS


def _auth_token() -> str | None:
    """The Ray token, where Ray's clients look: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray."""
    token = os.environ.get("RAY_AUTH_TOKEN")
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    if not token and os.path.isfile(path):
        token = Path(path).read_text().strip()
    return token or None


def auth_headers() -> dict[str, str]:
    token = _auth_token()
    return {"Authorization": f"Bearer {token}"} if token else {}


def check_reachable(address: str) -> None:
    """Fails fast, and clearly, when no Ray dashboard answers at `address`."""
    request = urllib.request.Request(f"{address.rstrip('/')}/api/version", headers=auth_headers())
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
                "`make submit RELEASE=<release>` which reads it for you",
            ) from None
        return  # any other HTTP answer means a dashboard is there
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise UsageError(
            "address",
            f"no Ray dashboard answers at {address} ({reason})",
            "start the local cluster with `make up`, pass ADDRESS=http://host:8265, or "
            "RELEASE=<helm release> to port-forward a cluster's head",
        ) from None


def precheck(job_args: list[str]) -> str:
    """Checks what can be checked without the cluster; returns the run name."""
    from absl import flags

    from launcher import train  # defines the launcher's absl flags

    fv = train.FLAGS
    try:
        rest = fv(["launcher.train", *job_args])
    except flags.Error as e:
        raise UsageError("flags", str(e), "see `python -m launcher.train --help`") from None
    from launcher.maxtext_args import MaxTextArgs
    from launcher.slices import from_flags

    args = MaxTextArgs.parse(rest[1:])
    args.check_required()
    chosen = from_flags(fv.accelerator_type, fv.topology, fv.num_slices, fv.chips_per_host,
                        fv.cpu_hosts, fv.cpu_devices_per_host)
    if chosen is not None:
        args.check_parallelism(chosen.devices_per_slice, chosen.num_slices, chosen.describe())
    return str(args.get("run_name"))


def submission_id_for(run_name: str) -> str:
    safe = re.sub(r"[^a-zA-Z0-9-]", "-", run_name).strip("-")[:40] or "job"
    return f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}"


def _ray_job(*args: str, address: str) -> list[str]:
    return ["ray", "job", *args, "--address", address]


def job_status(address: str, job_id: str) -> str:
    from ray.job_submission import JobSubmissionClient

    return str(JobSubmissionClient(address).get_job_status(job_id).value)


def _address(ns: argparse.Namespace, stack: contextlib.ExitStack) -> str:
    if getattr(ns, "release", None):
        from launcher.release import forwarded

        return stack.enter_context(forwarded(ns.release, ns.namespace, ns.dry_run))
    return resolve_address(ns.address)


def submit(ns: argparse.Namespace) -> int:
    job_args = ns.job_args[1:] if ns.job_args[:1] == ["--"] else ns.job_args
    run_name = precheck(job_args)
    with contextlib.ExitStack() as stack:
        return _submit(ns, job_args, run_name, _address(ns, stack))


def _submit(ns: argparse.Namespace, job_args: list[str], run_name: str, address: str) -> int:
    job_id = ns.submission_id or submission_id_for(run_name)
    entrypoint = [*ENTRYPOINT, *job_args]  # `ray job submit` shlex-joins what follows --
    if not ns.dry_run:
        check_reachable(address)
    run("submit the job", [*_ray_job("submit", address=address), "--submission-id", job_id,
                           "--no-wait", "--", *entrypoint], dry_run=ns.dry_run, capture=True)
    if not ns.dry_run:
        STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
        STATE_FILE.write_text(f"{job_id}\n{address}\n")
    print(f"{'would submit' if ns.dry_run else 'submitted'} job {job_id} to {address}",
          flush=True)
    if ns.no_wait or ns.dry_run:
        _next_steps(job_id)
        return 0
    run("follow the job's logs", _ray_job("logs", job_id, "--follow", address=address),
        check=False)
    status = job_status(address, job_id)
    print(f"\njob {job_id}: {status}", flush=True)
    _next_steps(job_id)
    return 0 if status == "SUCCEEDED" else 1


def _next_steps(job_id: str) -> None:
    print("next steps:")
    print(f"  make logs JOB={job_id}     # the job's logs")
    print(f"  make status JOB={job_id}   # PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED")
    print(f"  make stop JOB={job_id}     # stop it; checkpoints stay, a resubmit resumes")


def _last_job() -> tuple[str | None, str | None]:
    if STATE_FILE.is_file():
        job_id, _, address = STATE_FILE.read_text().partition("\n")
        return job_id.strip() or None, address.strip() or None
    return None, None


def act_on_job(ns: argparse.Namespace) -> int:
    last_id, last_address = _last_job()
    job_id = ns.job or last_id
    if not job_id:
        raise UsageError("JOB", "no job id given and none submitted from here yet",
                         "pass JOB=<submission id> (see `ray job list`)")
    address = resolve_address(ns.address or (last_address if not ns.job else None))
    check_reachable(address)
    from ray.job_submission import JobSubmissionClient

    try:
        JobSubmissionClient(address).get_job_info(job_id)
    except RuntimeError:
        raise UsageError("JOB", f"no job {job_id!r} on the Ray cluster at {address}",
                         f"list the jobs with `ray job list --address {address}`") from None
    extra = ["--follow"] if ns.command == "logs" and ns.follow else []
    proc = run(f"{ns.command} job {job_id}", [*_ray_job(ns.command, job_id, address=address),
                                              *extra], check=False)
    if ns.command == "status":
        print(f"job {job_id}: {job_status(address, job_id)}")  # one word a script can read
    return proc.returncode


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tpu-launcher", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("submit", help="submit a training job and follow it")
    p.add_argument("--address", help=f"Ray dashboard URL (default {DEFAULT_ADDRESS})")
    p.add_argument("--submission-id", help="job id (default <run_name>-<time>)")
    p.add_argument("--no-wait", action="store_true", help="return after submitting")
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    p.add_argument("--release", help="a tpu-stack Helm release: port-forward its head")
    p.add_argument("--namespace", default="default", help="the release's namespace")
    p.add_argument("job_args", nargs=argparse.REMAINDER,
                   help="launcher flags, then the MaxText config and key=value arguments")
    for name, what in (("logs", "print"), ("status", "show"), ("stop", "stop")):
        q = sub.add_parser(name, help=f"{what} a job (default: the last one submitted here)")
        q.add_argument("job", nargs="?", help="submission id")
        q.add_argument("--address")
        if name == "logs":
            q.add_argument("--follow", action="store_true")
    ns = parser.parse_args(argv)
    if _auth_token():
        # Ray's clients send the token only in token mode; the `ray job` children inherit it.
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    try:
        code = submit(ns) if ns.command == "submit" else act_on_job(ns)
    except UsageError as e:
        exit_with(e, prog=f"tpu-launcher {ns.command}")
    sys.exit(code)


if __name__ == "__main__":
    main()
