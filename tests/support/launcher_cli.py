"""`tpu-launcher ARGS` in the test's own process, as its console script runs it (a refusal is
exit code 2 and its message on stderr; argparse's own errors still raise SystemExit)."""

from __future__ import annotations

from launcher import cli


def tpu_launcher_here(capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr)."""
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err
