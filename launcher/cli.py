"""`tpu-launcher`: the user's one command, on a workstation. What the chart's pods and the
submitted jobs run in the cluster is the cluster's own door, `python -m launcher.runtime`, which
this module never imports.

Each command module adds its own parser and handler (`set_defaults(func=...)`; docs/commands.md's
table is written from them: ci/commands_doc.py); this module only assembles them and turns the
errors raised below into exit codes: 2 for a usage error (with the fix), the failed command's
code for an external command, 1 for a failed job.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys

from launcher.client.jobs.ray_api import RayJobsError
from launcher.core.errors import CommandError, UsageError, report
from launcher.core.package_version import installed_version
from launcher.core.runtime_door import CLUSTER_COMMANDS, RUNTIME_PROG

# The commands that group actions under a noun (`tpu-launcher gke plan`): each parser's
# dest is `<noun>_command`.
NOUNS = ("gke", "data", "local")


def _version() -> str:
    return installed_version() or "unknown"  # "unknown": a source tree never installed


_TABLE_COLUMNS = (
    ("NAME", ">14"), ("GEN", ">5"), ("TOPOLOGY", ">8"), ("CHIPS", ">5"), ("DEVICES", ">7"),
    ("HOSTS", ">5"), ("CHIPS/HOST", ">10"), ("MACHINE", "<18"), ("GKE ACCELERATOR", "<22"),
    ("HBM GiB/CHIP", ">12"), ("bf16 TFLOP/s/CHIP", ">17"),
)  # fmt: skip


def _tpu_table(ns: argparse.Namespace) -> int:
    """Every slice the table knows, a row each under a header; --json: the chart's copy."""
    import json

    from launcher.core.tpu.table import GENERATIONS, as_json_table, slice_shape

    if ns.json:
        print(json.dumps(as_json_table(), indent=2, sort_keys=True))
        return 0
    if ns.prices:
        from launcher.core.tpu.prices import LIST_PRICES, PRICES_AS_OF, PRICES_SOURCE

        print(f"{'GEN':>5} {'CAPACITY':<10} {'USD/CHIP-HOUR':>13}")
        for gen_name, by_capacity in LIST_PRICES.items():
            for capacity, usd in by_capacity.items():
                print(f"{gen_name:>5} {capacity:<10} {usd:>13.2f}")
        print(
            f"list prices as of {PRICES_AS_OF} ({PRICES_SOURCE}); a reservation is billed as "
            "on-demand; Spot, flex-start and a commitment's prices: the release's "
            "cost.pricesPerChipHour or a job's --price_per_chip_hour"
        )
        return 0
    rows: list[tuple[object, ...]] = [tuple(name for name, _ in _TABLE_COLUMNS)]
    for gen in GENERATIONS.values():
        for topo in gen.topologies:
            s = slice_shape(gen.name, topo)
            rows.append(
                (s.name, gen.name, topo, s.chips, s.devices, s.hosts, s.chips_per_host,
                 s.machine_type, gen.gke_accelerator, f"{gen.hbm_gib:g}",
                 f"{gen.peak_bf16_tflops:g}")
            )  # fmt: skip
    for row in rows:
        print(" ".join(f"{cell:{fmt}}" for cell, (_, fmt) in zip(row, _TABLE_COLUMNS, strict=True)))
    return 0


def _dashboard(ns: argparse.Namespace) -> int:
    from launcher.core.job.dashboard import render

    sys.stdout.write(render())
    return 0


def _parser() -> argparse.ArgumentParser:
    from launcher.client import completion
    from launcher.client.data import commands as data_commands
    from launcher.client.gke import commands as gke_commands
    from launcher.client.jobs import commands as job_commands
    from launcher.client.jobs import listing as job_list
    from launcher.client.local import commands as local_commands
    from launcher.client.serve import fit as serve_fit
    from launcher.client.serve import saxml_http

    parser = argparse.ArgumentParser(
        prog="tpu-launcher",
        description=__doc__.split("\n\nEach command")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="`tpu-launcher COMMAND --help` says what each takes.",
    )
    parser.add_argument("--version", action="version", version=f"tpu-launcher {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    job_commands.add_parsers(sub)
    job_list.add_parser(sub)
    data_commands.add_parsers(sub)
    saxml_http.add_parser(sub)
    serve_fit.add_parser(sub)
    local_commands.add_parsers(sub)
    gke_commands.add_parsers(sub)
    p = sub.add_parser("tpu-table", help="print the TPU table (--json: the chart's copy)")
    p.add_argument(
        "--json",
        action="store_true",
        help="the chart's copy (charts/tpu-stack/files/tpu-table.json)",
    )
    p.add_argument(
        "--prices",
        action="store_true",
        help="the dated list prices per chip-hour a job's cost is computed from",
    )
    p.set_defaults(func=_tpu_table)
    p = sub.add_parser(
        "dashboard",
        help="print the Grafana dashboard of the jobs' metrics (the chart's copy; import it "
        "into any Grafana with a Prometheus data source)",
    )
    p.set_defaults(func=_dashboard)
    completion.add_parser(sub, parser)
    return parser


def _subparser(parser: argparse.ArgumentParser, words: list[str | None]) -> argparse.ArgumentParser:
    """The parser the command words lead to (`gke`, `plan`: gke plan's)."""
    for word in words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            break
        parser = subs[0].choices[word]
    return parser


def _refuse_unknown(parser: argparse.ArgumentParser, word: str) -> None:
    """Exits 2 with the subcommand's usage, the word it does not take, and the option it most
    likely meant (argparse alone answers from the top-level parser, with no hint)."""
    known = [o for a in parser._actions for o in a.option_strings]
    close = difflib.get_close_matches(word.partition("=")[0], known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else f"`{parser.prog} --help` lists what it takes"
    parser.error(f"unrecognized argument {word}: {hint}")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subs[0].choices) if subs else {}


def _check_words(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Before argparse reads them: a mistyped command gets the closest ones, and an option the
    command does not take gets the closest of its own, named as typed (argparse would report a
    required option missing first, or take a prefix of one as the option itself)."""
    words = list(argv)
    while words and (commands := _subcommands(parser)):
        word = words[0]
        if word.startswith("-"):
            return  # --help, --version: argparse's
        if word in CLUSTER_COMMANDS and parser.prog == "tpu-launcher":
            parser.error(
                f"{word!r} is the cluster's own command, which the chart's pods and the "
                f"submitted jobs run there: `{RUNTIME_PROG} {word}` in the launcher image "
                "(`tpu-launcher submit` sends a job that runs it)"
            )
        if word not in commands:
            # A noun's actions count as their two words (`local-status`: `local status`).
            known = [*commands] + [
                f"{noun} {action}" for noun in NOUNS if noun in commands
                for action in _subcommands(commands[noun])
            ]  # fmt: skip
            close = difflib.get_close_matches(word, known, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}?" if close else "see --help"
            parser.error(f"no command {word!r}: {hint}")
        parser, words = commands[word], words[1:]
    options = {o: a for a in parser._actions for o in a.option_strings}
    takes_rest = any(a.nargs == argparse.REMAINDER for a in parser._actions)
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--":
            return
        elif word.startswith("-") and len(word) > 1 and not _is_number(word):
            name, eq, _ = word.partition("=")
            if name not in options:
                _refuse_unknown(parser, word)
            skip = not eq and options[name].nargs != 0
        elif takes_rest:
            return  # the rest is the job's (or the script's) own


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """Runs one command; returns its exit code (the console script exits with it)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser()
    if not argv:  # as kubectl and gcloud do: what there is, not an error
        parser.print_help()
        return 0
    _check_words(parser, argv)
    ns, unknown = parser.parse_known_args(argv)
    action = next(filter(None, (getattr(ns, f"{n}_command", None) for n in NOUNS)), None)
    if unknown:
        _refuse_unknown(_subparser(parser, [ns.command, action]), unknown[0])
    prog = " ".join(["tpu-launcher", ns.command, *filter(None, [action])])
    try:
        if isinstance(getattr(ns, "values", None), list):  # every command's -f, read one way
            from launcher.client.release.values_presets import resolve_all

            ns.values = resolve_all(ns.values)
        if hasattr(ns, "kube_context") and getattr(ns, "release", None):
            from launcher.client.kube_context import pinned

            with pinned(ns):  # every kubectl and helm call of the command goes there
                return ns.func(ns)
        return ns.func(ns)
    except (UsageError, CommandError) as e:
        return report(e, prog=prog)
    except RayJobsError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:
        from launcher.core.extras import missing

        if (said := missing(e.name or "", prog)) is None:
            raise
        return report(said, prog=prog)


def console_main() -> None:
    try:
        sys.exit(main())
    except BrokenPipeError:  # `tpu-launcher ... | head` stopped reading: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second one at exit
        sys.exit(1)
