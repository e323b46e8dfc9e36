"""The installed gcloud CLI as an authority on its own commands: its argument parser (an unknown
flag, a bad choice or value, a missing file) and its node system-configuration loader (the
fields `--system-config-from-file` takes), run on argument vectors in one process of gcloud's
own Python, with no call to Google and no credentials. Google's `google-cloud-cli` is not in
the package registries; where it is not installed, `where()` is None and the tests say so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# Runs inside gcloud's Python: gcloud's own CLI tree (gcloud_main.CreateCLI, what `gcloud`
# itself builds) parses each argv; a command that takes a system configuration has it loaded
# by gcloud's loader (api_lib/container/util.LoadSystemConfigFromYAML), which refuses unknown
# fields. The parser is the CLI's private attribute: gcloud has no public parse-only entry.
_PARSE = r"""
import json, os, sys, tempfile
sdk = sys.argv[1]
sys.path[:0] = [os.path.join(sdk, "lib"), os.path.join(sdk, "lib", "third_party")]
from googlecloudsdk import gcloud_main
from googlecloudsdk.api_lib.container import util
from googlecloudsdk.api_lib.util import apis
parser = gcloud_main.CreateCLI([])._CLI__parser
messages = apis.GetMessagesModule("container", "v1")
said = []
out = os.dup(1)
for argv in json.load(sys.stdin):
    # gcloud's logger holds the process's stderr: its errors are read back from the file.
    with tempfile.TemporaryFile("w+") as err:
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(err.fileno(), 1); os.dup2(err.fileno(), 2)
        try:
            ns = parser.parse_args(argv)
            config = getattr(ns, "system_config_from_file", None)
            if config:
                util.LoadSystemConfigFromYAML(messages.NodeConfig(), config, False, messages)
            problem = None
        except SystemExit:
            problem = ""
        except Exception as e:
            problem = f"{type(e).__name__}: {e}"
        sys.stdout.flush(); sys.stderr.flush()
        err.seek(0)
        lines = [l for l in err.read().splitlines() if l.startswith("ERROR")]
        said.append(problem if problem or problem is None else (lines[0] if lines else "refused"))
os.dup2(out, 1)
print(json.dumps(said))
"""


def where() -> Path | None:
    """The installed Cloud SDK's root (the directory above bin/gcloud), or None."""
    found = shutil.which("gcloud")
    if found is None:
        return None
    root = Path(found).resolve().parents[1]
    return root if (root / "lib" / "googlecloudsdk").is_dir() else None


def required() -> Path:
    """The installed Cloud SDK's root; where none is installed the test skips, or fails under
    `.ci/run` (TPU_STACK_REQUIRE_GCLOUD=1: CI's machines have Google's google-cloud-cli)."""
    import pytest

    root = where()
    if root is None:
        if os.environ.get("TPU_STACK_REQUIRE_GCLOUD"):
            pytest.fail("no gcloud installed: CI's machines have Google's google-cloud-cli")
        pytest.skip("no gcloud installed here (Google's google-cloud-cli; not on PyPI)")
    return root


def version(root: Path) -> str:
    return (root / "VERSION").read_text().strip()


def _python(root: Path) -> str:
    """The Python gcloud runs on: CLOUDSDK_PYTHON, else its bundled one, else python3 (as
    bin/gcloud chooses)."""
    bundled = root / "platform" / "bundledpythonunix" / "bin" / "python3"
    return os.environ.get("CLOUDSDK_PYTHON") or (str(bundled) if bundled.exists() else "python3")


def refusals(root: Path, argvs: list[list[str]]) -> list[str | None]:
    """Per argv (its words after `gcloud`): None where gcloud takes it, else gcloud's error."""
    with tempfile.TemporaryDirectory() as config:
        env = {**os.environ, "CLOUDSDK_CONFIG": config, "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}
        proc = subprocess.run(
            [_python(root), "-c", _PARSE, str(root)],
            input=json.dumps(argvs),
            text=True,
            capture_output=True,
            env=env,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
