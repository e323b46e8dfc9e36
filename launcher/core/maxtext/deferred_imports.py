"""Modules MaxText's trainer imports when it loads but a job uses only when asked for: they are
loaded on first use instead, so a host that does not use them does not wait for them (training
and generating workers, and preflight's ahead-of-time compile, which imports the same trainer).

MaxText's trainer imports Vertex AI's SDK (`google.cloud.aiplatform`, through
cloud_accelerator_diagnostics' TensorBoard uploader) at module level; only
`use_vertex_tensorboard=True` uses it. Importing it is about a third of importing the trainer,
paid by every host at every start and restart (`benchmarks/worker_start.py`). Its goodput
library (ml_goodput_measurement) imports `scipy.stats` for one function of its step-time
statistics: another 1.5 s.

Only what is imported as `from parent import child` stays deferred: `import child` looks at the
module's `__spec__`, which loads it (importlib's _find_and_load), so sympy (`import sympy` in
maxtext.layers.engram) and tokamax cannot be deferred this way.

Where torch is installed beside JAX (the tests' environment, which runs PyTorch jobs too; the
JAX image has none), transformers and tensorboardX would import it with MaxText: 15 s more of a
host's start on 2 cores (the trainer's import, 12.5 s with it hidden, 28 s without), and torch's
import looks up the source of every loaded module, which loads the deferred ones."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator

DEFERRED = ("google.cloud.aiplatform", "scipy.stats")
KEPT_OUT = ("torch",)  # a JAX process never uses it


@contextlib.contextmanager
def maxtext_imports() -> Iterator[None]:
    """Around a JAX process's import of MaxText: what it does not use waits (DEFERRED), and
    KEPT_OUT is hidden, so the libraries that import it when they can (transformers, and
    tensorboardX for the goodput monitoring) decide, once, that it is not installed. Hidden by
    a None in sys.modules, the import system's own marker, for the import's duration only:
    libraries that read sys.modules (scipy's array API helpers) take a lasting one for the
    module itself."""
    defer_unused_imports()
    hidden = [name for name in KEPT_OUT if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, "") is None:
                del sys.modules[name]


def defer_unused_imports(names: tuple[str, ...] = DEFERRED) -> list[str]:
    """Registers each module, not yet imported, to execute on its first attribute access
    (importlib's LazyLoader); `import` and `from ... import module` then cost nothing. Returns
    the names deferred (none that is missing or already imported)."""
    deferred = []
    for name in names:
        if name in sys.modules:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # a parent package is not installed
            continue
        if spec is None or spec.loader is None:
            continue
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        parent, _, child = name.rpartition(".")
        if parent:  # as the import system does: `from parent import child` finds it
            setattr(sys.modules[parent], child, module)
        deferred.append(name)
    return deferred
