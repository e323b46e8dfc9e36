"""The engine under `tpu-launcher gke plan|up|down`: a plan is steps, each a command with the
read-only check that tells whether it is done already. `execute` runs them in order, skipping
what is done, so a second run picks up where the first stopped; `format_plan` writes the same
plan as a bash script that does the same. What the steps are: gke/plan.py (the cluster, the
bucket, up and down), gke/pools.py (node pools), gke/image.py (the image and the chart).
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from launcher.client.commands import run
from launcher.client.gke.target import GkeTarget
from launcher.core.errors import UsageError
from launcher.core.tpu.table import gke_version

PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


@dataclass(frozen=True)
class Check:
    """A read-only command that tells whether a step is done: it succeeds (and prints `output`,
    when given); `negate` turns it round (a deletion is done when its object is gone)."""

    argv: list[str]
    output: str | None = None
    negate: bool = False
    contains: bool = False  # `output` is a line of what it prints, not all of it
    at_least: str | None = None  # it prints a GKE version: done when not older than this

    def done(self, proc_ok: bool, stdout: str) -> bool:
        said = stdout.strip().splitlines() if self.contains else [stdout.strip()]
        if self.at_least is not None:
            found = proc_ok and gke_version(stdout) >= gke_version(self.at_least)
        else:
            found = proc_ok and (self.output is None or self.output in said)
        return found != self.negate


@dataclass(frozen=True)
class Step:
    what: str
    argv: list[str]
    done_if: Check | None = None
    capture_as: str | None = None  # its stdout becomes ${capture_as} in later steps
    # A command that lists items: the step runs once per item, `{item}` in argv replaced.
    for_each: list[str] | None = None
    # What is done already must be what the step would make: when done_if finds it, this
    # check must print its output too, else the plan stops, with `mismatch_fix` as the fix.
    same_as: Check | None = None
    mismatch_fix: str = ""
    wanted: str = ""  # what same_as asks of it, in words (the machine, topology, capacity)
    shown_by: list[str] | None = None  # a command that shows what is there instead
    # Kept, not done: when this check says so (and its command succeeds), the step is left out
    # and what it printed is named (a cluster that still holds node pools of others).
    keep_if: Check | None = None
    kept_because: str = ""
    # A condition, not a command: `done_if` must hold, else the plan stops here, nothing after
    # it made, with `mismatch_fix` as the fix (argv is empty).
    required: bool = False
    # A file the later steps read (a node pool's system configuration), written here: (path,
    # content); argv is empty.
    writes: tuple[str, str] | None = None


@dataclass(frozen=True)
class Plan:
    steps: list[Step]
    notes: list[str] = field(default_factory=list)
    stays: list[str] = field(default_factory=list)  # what `gke down` leaves, said before

    def commands(self, program: str) -> list[list[str]]:
        """Every command of `program` the plan runs or checks with (its steps', their checks',
        listings')."""
        found = []
        for s in self.steps:
            found += [s.argv, s.for_each or [], s.shown_by or []]
            found += [c.argv for c in (s.done_if, s.same_as, s.keep_if) if c is not None]
        return [a for a in found if a and a[0] == program]


def gcloud(*words: str) -> list[str]:
    return ["gcloud", *words]


def iam_binding(
    group: tuple[str, ...], *resource: str, member: str, role: str, condition: str = "None"
) -> list[str]:
    """`gcloud GROUP add-iam-policy-binding RESOURCE...`, always with its --condition: once a
    policy holds a conditional binding (the vLLM compile cache's on the bucket), gcloud asks
    which condition every later binding takes and, with no terminal to ask on, fails ("prohibited
    in non-interactive mode"; gcloud's `add-iam-policy-binding --condition` help: None is the
    binding without one). So a rerun of `gke up`, or another release's on a shared bucket, runs
    unattended."""
    return gcloud(
        *group,
        "add-iam-policy-binding",
        *resource,
        f"--member={member}",
        f"--role={role}",
        f"--condition={condition}",
    )


def location_flags(target: GkeTarget) -> list[str]:
    return [f"--location={target.location}", f"--project={target.project}"]


# What a word may hold bare in the script: no quote, `$`, glob, space or operator.
BARE = re.compile(r"[\w@%+=:,./\[\]-]+")


def shell_word(arg: str) -> str:
    """Quotes for the shell: the plan's own ${VARS} (a step captures them, or the user exports
    them) expand, in double quotes; everything else is literal, a user's `$HOME` included."""
    parts = PLACEHOLDER.split(arg)  # literal, name, literal, name, ..., literal
    words = [
        f'"${{{part}}}"' if i % 2 else part if BARE.fullmatch(part) else shlex.quote(part)
        for i, part in enumerate(parts)
        if part or i % 2
    ]
    return "".join(words) or "''"


def shell_command(argv: list[str]) -> str:
    words = [shell_word(a) for a in argv]
    cut = next((i for i, w in enumerate(words) if w.startswith("--")), len(words))
    return " \\\n    ".join([" ".join(words[:cut]), *words[cut:]])


def _guard(check: Check) -> str:
    """A shell test that is true when the step is done."""
    quiet = " ".join(shell_word(a) for a in check.argv)
    if check.at_least is not None:  # sort -V orders GKE's versions number by number
        least = shell_word(check.at_least)
        oldest = f"printf '%s\\n' {least} \"$({quiet} 2>/dev/null)\" | sort -V | head -n 1"
        test = f'[ "$({oldest})" = {least} ]'
    elif check.output is not None and check.contains:
        test = f"{quiet} 2>/dev/null | grep -qxF {shell_word(check.output)}"
    elif check.output is not None:
        test = f'[ "$({quiet} 2>/dev/null)" = {shell_word(check.output)} ]'
    else:
        test = f"{quiet} >/dev/null 2>&1"
    return f"! {test}" if check.negate else test


def format_plan(plan: Plan, before: list[str] | None = None) -> str:
    """A bash script of the plan: each step guarded by its check, so it can run twice.
    `before`: shell lines that run ahead of every step (checks that refuse before anything is
    made)."""
    lines = ["#!/usr/bin/env bash", "set -euo pipefail"]
    lines += [f"# {n}" for n in plan.notes]
    lines += before or []
    for step in plan.steps:
        lines.append(f"\n# {step.what}")
        if step.required and step.done_if:
            refuse = shell_word(f"error: {step.what}: not so; fix: {step.mismatch_fix}")
            check = f"{_guard(step.done_if)} || {{ echo {refuse} >&2; exit 1; }}"
            if step.keep_if:  # not asked where it is kept (kept: {kept_because})
                check = f"if ! {_guard(step.keep_if)}; then\n  {check}\nfi"
            lines.append(check)
            continue
        if step.writes:
            path, content = step.writes
            lines.append(f"mkdir -p {shell_word(str(Path(path).parent))}")
            lines.append(f"cat > {shell_word(path)} <<'EOF'\n{content}EOF")
            continue
        # A for_each step's {item} is the loop's ${item}, quoted as the plan's own ${VARS} are.
        argv = [a.replace("{item}", "${item}") for a in step.argv] if step.for_each else step.argv
        command = shell_command(argv)
        if step.capture_as:
            command = f"{step.capture_as}=$({command})"
        if step.for_each:
            listing = " ".join(shell_word(a) for a in step.for_each)
            command = f"for item in $({listing}); do\n  {command}\ndone"
        if step.done_if and step.same_as:
            refuse = shell_word(
                f"error: {step.what} exists, not as {step.wanted or step.same_as.output}; "
                f"fix: {step.mismatch_fix}"
            )
            lines.append(
                f"if {_guard(step.done_if)}; then\n  {_guard(step.same_as)} || "
                f"{{ echo {refuse} >&2; exit 1; }}\nfi"
            )
        if step.done_if:
            command = f"{_guard(step.done_if)} ||\n  {command}"
        if step.keep_if:  # kept: {kept_because}
            command = f"{_guard(step.keep_if)} ||\n  {command}"
        lines.append(command)
    lines += [f"# {s}" for s in plan.stays]
    return "\n".join(lines) + "\n"


def unset_variables(steps: list[Step]) -> list[str]:
    """The ${VARS} the plan still needs from its user (not those a step captures)."""
    captured = {s.capture_as for s in steps}
    found = {m for s in steps for a in s.argv for m in PLACEHOLDER.findall(a)}
    return sorted(found - captured)


def execute(plan: Plan, say: Callable[[str], None] = print) -> int:
    """Runs the steps in order and stops at the first failure; a step whose check says it is
    done is skipped, so a second run picks up where the first stopped."""
    if unset := unset_variables(plan.steps):
        raise UsageError(
            "target",
            f"{', '.join(unset)} not given",
            "pass --project, --cluster, --location (and --node-zone for a regional cluster, "
            "--bucket unless the values name the bucket), or export PROJECT_ID, CLUSTER_NAME, "
            "LOCATION, NODE_ZONE, BUCKET",
        )
    tools = {a[0] for s in plan.steps for a in (s.argv, s.done_if.argv if s.done_if else []) if a}
    missing = sorted(t for t in tools if shutil.which(t) is None)
    if missing:
        print(
            f"{' and '.join(missing)} not installed on this machine: nothing was done. The "
            "commands:\n",
            file=sys.stderr,
        )
        print(format_plan(plan))
        return 1
    captured: dict[str, str] = {}
    total = len(plan.steps)
    for i, step in enumerate(plan.steps, 1):
        if step.keep_if:
            proc = run(f"check {step.what}", step.keep_if.argv, check=False, capture=True)
            if proc.returncode == 0 and step.keep_if.done(True, proc.stdout):
                held = ", ".join(proc.stdout.split())
                say(f"[{i}/{total}] {step.what}: kept, {step.kept_because}: {held}")
                continue
        if step.done_if:
            proc = run(f"check {step.what}", step.done_if.argv, check=False, capture=True)
            if step.required and not step.done_if.done(proc.returncode == 0, proc.stdout):
                said = proc.stdout.strip() or proc.stderr.strip()
                raise UsageError(
                    "cluster", f"{step.what}: not so ({said or 'nothing printed'})",
                    step.mismatch_fix,
                )  # fmt: skip
            if step.required:
                say(f"[{i}/{total}] {step.what}: yes")
                continue
            if step.done_if.done(proc.returncode == 0, proc.stdout):
                if step.same_as is not None:
                    same = run(f"check {step.what}", step.same_as.argv, check=False, capture=True)
                    if not step.same_as.done(same.returncode == 0, same.stdout):
                        if step.shown_by:
                            same = run(
                                f"show {step.what}", step.shown_by, check=False, capture=True
                            )
                        raise UsageError(
                            "values",
                            f"{step.what}: one of that name exists, made otherwise "
                            f"({' '.join(same.stdout.split()) or 'unreadable'}, not "
                            f"{step.wanted or step.same_as.output})",
                            step.mismatch_fix,
                        )
                say(f"[{i}/{total}] {step.what}: done already, skipped")
                continue
        say(f"[{i}/{total}] {step.what}")
        if step.writes:
            path, content = step.writes
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(content)
            continue
        argv = [PLACEHOLDER.sub(lambda m: captured.get(m[1], m[0]), a) for a in step.argv]
        if step.for_each:
            items = run(f"list {step.what}", step.for_each, capture=True).stdout.split()
            say(f"  {', '.join(items) if items else 'none'}")
            for item in items:
                run(step.what, [a.replace("{item}", item) for a in argv])
            continue
        proc = run(step.what, argv, capture=bool(step.capture_as))
        if step.capture_as:
            captured[step.capture_as] = proc.stdout.strip()
    say(f"done: {total} steps")
    return 0
