"""`make submit` and friends: argument handling and early, clear failures (no cluster needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from launcher import cli
from tests.conftest import REPO


def tpu_launcher(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launcher.cli", *args], cwd=REPO, text=True,
                          capture_output=True, env=env)


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        ("http://a:1", {"RAY_ADDRESS": "b:2"}, "http://a:1"),
        (None, {"RAY_API_SERVER_ADDRESS": "c:3", "RAY_ADDRESS": "b:2"}, "http://c:3"),
        (None, {"RAY_ADDRESS": "b:2"}, "http://b:2"),
        (None, {}, cli.DEFAULT_ADDRESS),
    ],
)
def test_address_comes_from_flag_then_env_then_local(flag, env, expected, monkeypatch):
    for key in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cli.resolve_address(flag) == expected


def test_submission_id_is_named_after_the_run():
    assert cli.submission_id_for("rayjob-8b_4096/tp4").startswith("rayjob-8b-4096-tp4-")


def test_dry_run_shows_the_exact_ray_command():
    proc = tpu_launcher("submit", "--dry-run", "--submission-id", "j1", "--",
                        "--accelerator_type=v6e", "--topology=4x4", "base.yml",
                        "run_name=r", "ici_fsdp_parallelism=4", "ici_tensor_parallelism=4")
    assert proc.returncode == 0, proc.stderr
    assert ("ray job submit --address http://127.0.0.1:8265 --submission-id j1 --no-wait -- "
            "python -m launcher.train --accelerator_type=v6e --topology=4x4 base.yml run_name=r "
            "ici_fsdp_parallelism=4 ici_tensor_parallelism=4") in proc.stdout


def test_release_is_port_forwarded_with_its_token():
    proc = tpu_launcher("submit", "--dry-run", "--release", "tpu", "--namespace", "ml", "--",
                        "run_name=r")
    assert proc.returncode == 0, proc.stderr
    assert "kubectl -n ml get raycluster -l app.kubernetes.io/instance=tpu" in proc.stdout
    assert "jsonpath={.spec.authOptions.secretName}" in proc.stdout
    assert "port-forward 'service/<cluster>-head-svc' :8265" in proc.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--", "run_nam=x"], "run_nam: unknown MaxText config key 'run_nam'"),
        (["--", "steps=3"], "run_name: is required"),
        (["--", "--topolgy=4x4", "run_name=x"], "Unknown command line flag 'topolgy'"),
        (["--", "--accelerator_type=v9", "--topology=4x4", "run_name=x"],
         "unknown TPU accelerator type 'v9'"),
        (["--", "--accelerator_type=v6e", "--topology=4x4", "run_name=x",
          "ici_fsdp_parallelism=8", "ici_tensor_parallelism=4"],
         "= 32 does not match the 16 devices per slice"),
        (["--address", "http://127.0.0.1:9", "--", "run_name=x"],
         "no Ray dashboard answers at http://127.0.0.1:9"),
    ],
)
def test_user_errors_exit_2_with_the_fix_and_no_traceback(args, says):
    proc = tpu_launcher("submit", *args)
    assert proc.returncode == 2
    assert says in proc.stderr and "fix:" in proc.stderr
    assert "Traceback" not in proc.stderr
