"""`tpu-launcher completion bash|zsh`: a completion script made from the command's own parsers,
so every command, action and option completes as `--help` lists it, and a new option completes
without an edit here. zsh runs the bash script through its bashcompinit.

    eval "$(tpu-launcher completion bash)"    # in ~/.bashrc
    eval "$(tpu-launcher completion zsh)"     # in ~/.zshrc
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator

_SCRIPT = """\
_tpu_launcher() {
    local cur prev path=tpu-launcher w i
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${COMP_WORDS[i]}"
        [[ "$w" == "--" ]] && { compopt -o default; COMPREPLY=(); return; }
        case "$w" in -*) continue ;; esac
        [[ -n "${_tpu_launcher_words[$path $w]+x}" ]] && path="$path $w"
    done
    case " ${_tpu_launcher_valued[$path]} " in
        *" $prev "*) compopt -o default; COMPREPLY=(); return ;;
    esac
    COMPREPLY=($(compgen -W "${_tpu_launcher_words[$path]}" -- "$cur"))
}
complete -F _tpu_launcher tpu-launcher
"""


def _commands(
    parser: argparse.ArgumentParser, path: str = "tpu-launcher"
) -> Iterator[tuple[str, list[str], list[str]]]:
    """(command path, the words that may follow it, its options that take a value)."""
    words: list[str] = []
    valued: list[str] = []
    children: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            children += list(action.choices.items())
            words += list(action.choices)
        elif action.option_strings:
            words += action.option_strings
            if action.nargs != 0:
                valued += action.option_strings
    yield path, words, valued
    for name, child in children:
        yield from _commands(child, f"{path} {name}")


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    lines = ["declare -gA _tpu_launcher_words _tpu_launcher_valued"]
    for path, words, valued in _commands(parser):
        key = shlex.quote(path)
        lines.append(f"_tpu_launcher_words[{key}]={shlex.quote(' '.join(words))}")
        lines.append(f"_tpu_launcher_valued[{key}]={shlex.quote(' '.join(valued))}")
    prefix = "autoload -U +X bashcompinit && bashcompinit\n" if shell == "zsh" else ""
    return prefix + "\n".join(lines) + "\n" + _SCRIPT


def add_parser(sub: argparse._SubParsersAction, top: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "completion",
        help='print a shell completion script: eval "$(tpu-launcher completion bash)" in '
        "~/.bashrc (zsh: the same with zsh, in ~/.zshrc)",
    )
    p.add_argument("shell", choices=["bash", "zsh"], help="the shell to complete in")
    p.set_defaults(func=lambda ns: print(script(top, ns.shell), end="") or 0)
