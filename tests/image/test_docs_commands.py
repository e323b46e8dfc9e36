"""The docs are tested: every `tpu-launcher` line in a shell block of README.md and docs/*.md is
read by the installed client (the wheel in a fresh environment, tests/image/conftest.py), the
way a user pasting it would have it read: the command exists, each option is one it takes (no
prefix of one, no misspelling), a required one is there, and a values file it names resolves (a
preset or a file). `gke plan` lines run whole, against the FAKE gcloud's empty project (GKE
cannot run here). What a line names of the user's own (a corpus, a script, a job id) is theirs
and not looked for. Every relative link resolves."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.paths import REPO
from tests.image.conftest import HELM, run_client

pytestmark = pytest.mark.image
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class DocCommand:
    page: Path
    line: int
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}: {shlex.join(self.words)}"


def _logical_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Backslash continuations joined; a console block's `$ ` prompt and output dropped."""
    joined: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, text in lines:
        if pending is not None:
            pending = (pending[0], pending[1] + " " + text.strip())
        else:
            pending = (number, text.strip())
        if pending[1].endswith("\\"):
            pending = (pending[0], pending[1][:-1])
            continue
        joined.append(pending)
        pending = None
    if pending is not None:
        joined.append(pending)
    return joined


def doc_commands(page: Path) -> list[DocCommand]:
    """The `tpu-launcher` commands of a page's shell blocks (```sh, ```bash, ```console, and
    indented `$ ` lines), each with the line it starts on."""
    found, block, in_fence, shell = [], [], False, False
    for number, text in enumerate(page.read_text().splitlines(), 1):
        fence = FENCE.match(text.strip())
        if fence:
            if in_fence and shell:
                found += _logical_lines(block)
            in_fence, block = not in_fence, []
            shell = in_fence and fence[1] in ("sh", "bash", "shell", "console", "")
            continue
        if in_fence:
            block.append((number, text))
        elif text.startswith("    $ "):
            found.append((number, text.strip()))
        elif found and text.startswith("        ") and found[-1][1].endswith("\\"):
            found[-1] = (found[-1][0], found[-1][1][:-1] + " " + text.strip())
    commands = []
    for number, text in found:
        text = text.removeprefix("$ ").strip()
        if not text.startswith("tpu-launcher "):
            continue
        words = shlex.split(text, comments=True)
        commands.append(DocCommand(page, number, tuple(words)))
    return commands


COMMANDS = [c for page in PAGES for c in doc_commands(page)]

# Run with the installed client's own parser, as `tpu-launcher` itself reads the words, and
# nothing after: the words are checked, not acted on.
PARSE = """
import sys
from launcher import cli
from launcher.core.errors import UsageError, report
argv = sys.argv[1:]
parser = cli._parser()
cli._check_words(parser, argv)
ns, unknown = parser.parse_known_args(argv)
action = next(filter(None, (getattr(ns, f"{n}_command", None) for n in cli.NOUNS)), None)
if unknown:
    cli._refuse_unknown(cli._subparser(parser, [ns.command, action]), unknown[0])
if isinstance(getattr(ns, "values", None), list):
    from launcher.client.release.values_presets import resolve_all
    try:
        resolve_all(ns.values)
    except UsageError as e:
        sys.exit(report(e, prog="tpu-launcher"))
"""


def check(client, command: DocCommand) -> subprocess.CompletedProcess:
    python = str(client[0] / "bin" / "python")
    return subprocess.run(
        [python, "-c", PARSE, *command.words[1:]],
        capture_output=True,
        text=True,
        cwd=client[1],
        env={"HOME": str(client[1]), "PATH": "/usr/bin:/bin"},
    )


def test_the_docs_show_commands():
    pages = {c.page.name for c in COMMANDS}
    assert {"README.md", "gke.md", "data.md", "fine-tuning.md", "torch.md"} <= pages, pages
    assert len(COMMANDS) >= 25


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_every_command_in_the_docs_is_one_the_client_takes(client, command):
    proc = check(client, command)
    assert proc.returncode == 0, f"{command}\n{proc.stderr}"


def test_a_misspelled_flag_in_a_block_fails_the_check(client):
    """The check can fail: the README's first `gke plan` line, with one flag misspelled."""
    (plan,) = [
        c for c in COMMANDS if c.page.name == "README.md" and c.words[1:3] == ("gke", "plan")
    ][:1]
    wrong = DocCommand(
        plan.page, plan.line, tuple(w.replace("--values", "--valeus") for w in plan.words)
    )
    proc = check(client, wrong)
    assert proc.returncode == 2 and "--valeus: did you mean --values?" in proc.stderr, proc.stderr
    missing = DocCommand(plan.page, plan.line, ("tpu-launcher", "data", "prepare", "./corpus"))
    proc = check(client, missing)  # data prepare's --name is required
    assert proc.returncode == 2 and "--name" in proc.stderr, proc.stderr
    nosuch = DocCommand(plan.page, plan.line, (*plan.words[:3], "--values", "v6e-61"))
    proc = check(client, nosuch)
    assert proc.returncode == 2 and "no values file v6e-61" in proc.stderr, proc.stderr


GKE_ENV = {
    "PROJECT_ID": "my-proj",
    "CLUSTER_NAME": "ml",
    "LOCATION": "us-east5-b",
    "BUCKET": "my-proj-ckpts",
}


@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if c.words[1:3] == ("gke", "plan")], ids=str
)
def test_every_gke_plan_in_the_docs_plans(client, command, tmp_path):
    """Run as written, with the README's four variables exported (no gcloud is called: the plan
    is printed)."""
    proc = run_client(client, *command.words[1:], "--helm", HELM, env=GKE_ENV)
    assert proc.returncode == 0, f"{command}\n{proc.stderr}"
    assert "gcloud container clusters create" in proc.stdout


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", [p for p in PAGES], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        if not (page.parent / target.partition("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: {broken}"
