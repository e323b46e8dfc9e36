"""The tpu-launcher package's installed version, read in one place (`--version`, the chart a
client pulls, the skew against a release's image)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "tpu-launcher"


def installed_version() -> str | None:
    """None for a source tree that was never installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None


def install_spec(extra: str | None = None) -> str:
    """What pip installs this launcher again, with `extra`: the directory or wheel this install
    came from (PEP 610's direct_url.json), since the package is not on PyPI (a name there may be
    anyone's); unknown, the clone it came from."""
    import json
    import shlex
    from importlib.metadata import distribution
    from urllib.parse import unquote, urlparse

    where = "<your clone of tpu-stack>"
    try:
        recorded = distribution(DISTRIBUTION).read_text("direct_url.json")
    except PackageNotFoundError:
        recorded = None
    if recorded:
        url = urlparse(json.loads(recorded).get("url", ""))
        if url.scheme == "file":
            where = unquote(url.path)
    return shlex.quote(f"{where}[{extra}]" if extra else where)


def pip_install(extra: str) -> str:
    """The one way every message says how to add an extra: `pip install '<source>[extra]'`."""
    return f"`pip install {install_spec(extra)}`"
