"""Vertex AI's SDK, which MaxText's trainer imports through cloud_accelerator_diagnostics, and
scipy.stats, which its goodput library imports, are loaded on first use on a training host, and
still work when used. Each check runs in a fresh
interpreter: what is imported is process-wide."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.paths import REPO
from launcher.core.maxtext.deferred_imports import DEFERRED, defer_unused_imports

pytestmark = pytest.mark.unit

HEAVY = "google.cloud.aiplatform.initializer"  # what `import google.cloud.aiplatform` executes


def _run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_maxtexts_import_of_vertex_ai_waits_for_its_first_use():
    out = _run(
        "import sys\n"
        "from launcher.core.maxtext.deferred_imports import defer_unused_imports\n"
        "print(defer_unused_imports())\n"
        # What maxtext.common.vertex_tensorboard imports; it does `from google.cloud import
        # aiplatform` at module level.
        "from cloud_accelerator_diagnostics import tensorboard\n"
        f"print({HEAVY!r} in sys.modules)\n"
        "print(callable(tensorboard.aiplatform.init))\n"
        f"print({HEAVY!r} in sys.modules)\n"
    )
    # Not executed by the import; executed, and the real SDK, once used.
    assert out.splitlines() == [str(list(DEFERRED)), "False", "True", "True"]


def test_the_goodput_librarys_scipy_stats_waits_for_its_first_use_and_torch_stays_out():
    """In an environment with torch (this one: PyTorch jobs), tensorboardX, which the goodput
    library imports, would import it; a JAX process keeps it out (as the JAX image lacks it)."""
    out = _run(
        "import sys, importlib.util\n"
        "from launcher.core.maxtext.deferred_imports import maxtext_imports\n"
        "print(importlib.util.find_spec('torch') is not None)\n"  # installed here
        "with maxtext_imports():\n"
        # What maxtext.common.goodput imports; goodput_utils does `from scipy import stats`.
        "    from ml_goodput_measurement.src import goodput_utils\n"
        "    import transformers.utils.import_utils as transformers_imports\n"
        "print('scipy.stats._stats_py' in sys.modules, 'torch' in sys.modules)\n"
        "print(goodput_utils.stats.median_abs_deviation([1.0, 2.0, 4.0]))\n"
        "print('scipy.stats._stats_py' in sys.modules, 'torch' in sys.modules)\n"
        # Decided once, inside: transformers goes on without torch.
        "print(transformers_imports.is_torch_available())\n"
    )
    assert out.split() == ["True", "False", "False", "1.0", "True", "False", "False"]


def test_missing_or_already_imported_modules_are_left_alone():
    assert defer_unused_imports(("no_such_package.sub", "no_such_module")) == []
    assert defer_unused_imports(("json",)) == []  # imported long ago; nothing to defer
