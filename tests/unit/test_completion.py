"""`tpu-launcher completion bash`: the script, loaded into a real bash, completes commands,
actions and options from the parsers themselves, and leaves an option's value (a file) and a
job's arguments after `--` to bash's own file completion."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from launcher import cli
from launcher.client.completion import script

pytestmark = pytest.mark.unit


def _complete(*words: str) -> list[str]:
    """What bash offers for the last of `words` (the word being typed)."""
    probe = (
        script(cli._parser(), "bash")
        + f"COMP_WORDS=({shlex.join(['tpu-launcher', *words])}); "
        + "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); "
        + "compopt() { echo DEFAULT; }; _tpu_launcher; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    proc = subprocess.run(["bash", "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


def test_commands_actions_and_options_complete():
    assert _complete("gk") == ["gke"]
    assert _complete("gke", "") == ["-h", "--help", "plan", "up", "down", "queue", "compute-class"]
    assert "--values" in _complete("gke", "plan", "--va")
    assert _complete("status", "--wa") == ["--wait"]
    # An option's value does not end the command: the next option still completes.
    assert _complete("gke", "plan", "-f", "values/v6e-16.yaml", "--rel") == ["--release"]


def test_values_and_job_arguments_are_left_to_file_completion():
    assert _complete("gke", "plan", "-f", "") == ["DEFAULT"]
    assert _complete("submit", "--", "base.yml", "") == ["DEFAULT"]


def test_zsh_loads_it_through_bashcompinit():
    assert script(cli._parser(), "zsh").startswith("autoload -U +X bashcompinit && bashcompinit")
