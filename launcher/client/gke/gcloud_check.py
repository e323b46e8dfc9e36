"""Before `gke up` changes anything: does the installed gcloud take the plan's node system
configurations? An older gcloud refuses a field only when its step runs, after the cluster and
its CPU pool bill. Asked of the installed gcloud's own loader, offline, not of its help (which
omits fields the loader takes) nor of a version table: each pool step that reads a system
configuration is run as the plan would run it, with the file written to a directory of the
check's own and every request of gcloud's sent where nothing listens (`sandbox`). gcloud reads
the file before it sends anything: a field it does not take is refused then; a file it takes
ends in the refused connection. Nothing reaches Google; nothing is made.

What some gclouds lack (NEWER): the node shutdown fields of a Spot pool's system
configuration. gcloud 528.0.0's loader refuses both ("unknown fields" in kubeletConfig), though
GKE's API (NodeKubeletConfig) has them."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from launcher.client.commands import run
from launcher.client.gke.steps import Plan, Step, shell_command, shell_word
from launcher.core.errors import UsageError

# Kubelet fields (a node system configuration's) newer than some gclouds, with their source.
NEWER = {
    "shutdownGracePeriodSeconds": "GKE: Spot VMs (GKE API NodeKubeletConfig)",
    "shutdownGracePeriodCriticalPodsSeconds": "GKE: Spot VMs (GKE API NodeKubeletConfig)",
}
CONFIG_FLAG = "--system-config-from-file="
# Where the check's gcloud sends its requests: a port nothing listens on (1: tcpmux, never
# served), GKE's API overridden (gcloud's api_endpoint_overrides/container property).
NOWHERE = "http://127.0.0.1:1/"
# An older gcloud's loader (528.0.0's api_lib/container/util.py): `Invalid node config: unknown
# fields: ['a', 'b'] in "kubeletConfig"`.
UNKNOWN_FIELDS = re.compile(r"unknown fields: \[([^\]]*)\]")
UPDATE = (
    "update gcloud (`gcloud components update`; where a package manager installed it, its "
    "google-cloud-cli package), then run again"
)


PLACEHOLDER_TOKEN = "placeholder: the check sends no request anywhere that answers"


def _sandbox_env(directory: str) -> dict[str, str]:
    return {
        "CLOUDSDK_CONFIG": f"{directory}/config",
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": f"{directory}/token",
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER": NOWHERE,
    }


def sandbox(directory: Path) -> dict[str, str]:
    """gcloud's environment for the check: a configuration of its own in `directory` (the
    user's account, project and properties unread and untouched), a placeholder token (no
    credential is read or refreshed), no prompt, and GKE's API at NOWHERE."""
    (directory / "token").write_text(PLACEHOLDER_TOKEN + "\n")
    return _sandbox_env(str(directory))


def _config_readers(plan: Plan) -> list[tuple[Step, str]]:
    """The plan's steps that read a system configuration, each with the word naming it."""
    return [
        (step, word)
        for step in plan.steps
        if not step.for_each
        for word in step.argv
        if word.startswith(CONFIG_FLAG)
    ]


def _written(plan: Plan) -> dict[str, str]:
    """The files the plan's steps write (path: content): the system configurations."""
    return {step.writes[0]: step.writes[1] for step in plan.steps if step.writes}


def _asked_with(step: Step, reads: str, copy: str) -> list[str]:
    """The step's command reading its system configuration from `copy`."""
    return [f"{CONFIG_FLAG}{copy}" if w == reads else w for w in step.argv]


def refused_fields(plan: Plan) -> list[str]:
    """The kubelet fields the installed gcloud's loader refuses in the plan's system
    configurations (empty: it takes them all)."""
    written = _written(plan)
    refused: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="tpu-launcher-gcloud-check-") as tmp:
        env = sandbox(Path(tmp))
        for index, (step, reads) in enumerate(_config_readers(plan)):
            copy = Path(tmp) / f"system-config-{index}.yaml"
            copy.write_text(written.get(reads.removeprefix(CONFIG_FLAG), ""))
            argv = _asked_with(step, reads, str(copy))
            tried = run(f"ask gcloud's loader about {step.what}", argv, env=env, capture=True,
                        check=False)  # fmt: skip
            if found := UNKNOWN_FIELDS.search(tried.stderr or ""):
                refused |= {f.strip().strip("'\"") for f in found[1].split(",") if f.strip()}
    return sorted(refused)


def require_gcloud_knows(plan: Plan) -> None:
    """Stops gke up (and gke plan), before any step, where the installed gcloud refuses what
    the plan uses."""
    if not _config_readers(plan) or not shutil.which("gcloud"):
        return
    if refused := refused_fields(plan):
        sources = "; ".join(f"{f}: {NEWER.get(f, 'GKE API NodeKubeletConfig')}" for f in refused)
        raise UsageError(
            "gcloud",
            f"the installed gcloud does not know {', '.join(refused)} in a node system "
            f"configuration, which this plan's Spot pools set ({sources}); it would refuse "
            "them after the cluster is made",
            UPDATE,
        )


SCRIPT_DIR = "${TPU_LAUNCHER_GCLOUD_CHECK}"  # the printed script's own directory for the check


def script_guard(plan: Plan) -> list[str]:
    """The same check in the printed script, ahead of its first step: the gcloud that runs the
    script (another machine's, a CI runner's) is asked, not the one that printed it."""
    readers = _config_readers(plan)
    if not readers:
        return []
    written = _written(plan)
    env = [f"{k}={v}" for k, v in _sandbox_env(SCRIPT_DIR).items()]
    lines = [
        "",
        "# Before anything is made: does this gcloud's own loader take the node system",
        "# configurations? Each step that reads one is run offline (a gcloud configuration of",
        "# its own, a placeholder token, GKE's API at a port nothing listens on): a field it",
        "# does not know is refused before any request; a file it takes ends in the refused",
        "# connection. Nothing reaches Google; nothing is made.",
        'TPU_LAUNCHER_GCLOUD_CHECK="$(mktemp -d)"',
        "trap 'rm -rf \"${TPU_LAUNCHER_GCLOUD_CHECK}\"' EXIT",
        f"echo {shell_word(PLACEHOLDER_TOKEN)} > {shell_word(SCRIPT_DIR + '/token')}",
    ]
    for index, (step, reads) in enumerate(readers):
        copy = f"{SCRIPT_DIR}/system-config-{index}.yaml"
        content = written.get(reads.removeprefix(CONFIG_FLAG), "")
        refuse = shell_word(
            f"error: gcloud: the installed gcloud refuses a field of the system configuration "
            f"of {step.what} (it would refuse it after the cluster is made):"
        )
        lines += [
            f"cat > {shell_word(copy)} <<'EOF'\n{content}EOF",
            f'asked="$({shell_command(["env", *env, *_asked_with(step, reads, copy)])} 2>&1 '
            '|| true)"',
            'if [[ "${asked}" == *"unknown fields"* ]]; then',
            f"  echo {refuse} >&2",
            "  grep -o 'unknown fields: \\[[^]]*\\]' <<<\"${asked}\" >&2 || true",
            f"  echo {shell_word('fix: ' + UPDATE)} >&2",
            "  exit 1",
            "fi",
        ]
    return lines
