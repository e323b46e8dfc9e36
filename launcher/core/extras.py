"""The package's extras (pyproject.toml's optional-dependencies) by the top-level modules they
bring: one table for every command that finds a module missing, so the extra it names is the
one that installs it. tests/unit/test_extras.py holds the table to pyproject.toml's extras and
to each installed distribution's own list of modules."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.errors import UsageError
from launcher.core.package_version import pip_install


@dataclass(frozen=True)
class Extra:
    name: str
    modules: frozenset[str]  # the top-level modules its own requirements bring
    where: str  # where its wheels install


EXTRAS = (
    Extra(
        "data",
        frozenset(
            {"array_record", "pyarrow", "tqdm", "transformers", "sentencepiece", "tiktoken"}
            | {"tokenizers", "numpy"}  # transformers' own
        ),
        "any OS, Python 3.11+; no JAX or MaxText",
    ),
    Extra("gcs", frozenset({"google"}), "any OS"),  # google-cloud-storage's namespace
    Extra(
        "preflight",
        # MaxText's own and what it brings that the launcher imports by name.
        frozenset({"maxtext", "jax", "jaxlib", "libtpu", "orbax", "grain"}),
        "Linux x86_64, Python 3.12",
    ),
    Extra("jobs", frozenset({"ray", "matplotlib", "psutil"}), "Linux x86_64"),
)


def extra_of(module: str) -> Extra | None:
    """The extra that brings `module` (a dotted name: its top level counts), or None."""
    top = module.partition(".")[0]
    return next((extra for extra in EXTRAS if top in extra.modules), None)


def missing(module: str, prog: str) -> UsageError | None:
    """What `prog` says when `module` is not installed: the extra and how to get it (None: no
    extra brings it, which is a bug to show whole)."""
    extra = extra_of(module)
    if extra is None:
        return None
    command = prog.removeprefix("tpu-launcher ")
    # The data extra alone serves data prepare; any other command needing its modules needs
    # the training stack too, which brings them (one install line, not two in turn).
    if extra.name == "gcs" or (extra.name == "data" and prog.endswith(" data prepare")):
        return UsageError(
            command,
            f"this command needs the client's {extra.name} extra ({module} is not installed)",
            f"{pip_install(extra.name)} ({extra.where})"
            + (f"; for gs:// also {pip_install('gcs')}" if extra.name == "data" else ""),
        )
    skip = " or submit with --skip-preflight," if prog.endswith(" submit") else ""
    return UsageError(
        command,
        f"this command needs the training stack ({module} is not installed): the client "
        "package leaves out JAX, MaxText, libtpu and Ray",
        f"install it beside the client with {pip_install('preflight')} (preflight) or "
        f"{pip_install('runtime')} (the local CPU slice: demo, up); its "
        f"wheels are for {extra.where}. Elsewhere,"
        f"{skip} run the command in the launcher image (`docker run --rm -v $PWD:/w -w /w "
        "<image> preflight ...`; its entrypoint is tpu-launcher)",
    )
