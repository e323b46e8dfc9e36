"""The tpu-launcher package's installed version, read in one place (`--version`, the chart a
client pulls, the skew against a release's image)."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "tpu-launcher"


def installed_version() -> str | None:
    """None for a source tree that was never installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None


@cache
def installed_from() -> str | None:
    """The directory or wheel this install came from (PEP 610's direct_url.json), or None."""
    import json
    from importlib.metadata import distribution
    from urllib.parse import unquote, urlparse

    try:
        recorded = distribution(DISTRIBUTION).read_text("direct_url.json")
    except PackageNotFoundError:
        return None
    url = urlparse(json.loads(recorded).get("url", "")) if recorded else None
    return unquote(url.path) if url and url.scheme == "file" else None


def install_spec(extra: str | None = None) -> str:
    """What pip installs this launcher again, with `extra`: where this install came from, since
    the package is not on PyPI (a name there may be anyone's); unknown, the clone."""
    import shlex

    where = installed_from() or "<your clone of tpu-stack>"
    return shlex.quote(f"{where}[{extra}]" if extra else where)


def doc(page: str) -> str:
    """Where a docs/ page is for this user: in the clone the launcher was installed from (or
    runs in), by its path; else named in the repository."""
    from pathlib import Path

    clone = installed_from()
    for root in (clone, str(Path(__file__).resolve().parents[2])):
        if root and (Path(root) / "docs" / page).is_file():
            return str(Path(root) / "docs" / page)
    return f"docs/{page} in the tpu-stack repository"


def pip_install(extra: str) -> str:
    """The one way every message says how to add an extra: `pip install '<source>[extra]'`."""
    return f"`pip install {install_spec(extra)}`"
