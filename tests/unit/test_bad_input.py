"""Every user mistake gets its own clear message, exit code 2 and no traceback: one table over
both entry points (`tpu-launcher submit` on a workstation, `python -m launcher.runtime train` in the
cluster), each run in process as its console script runs it."""

from __future__ import annotations

import json

import pytest
from absl.testing import flagsaver

from launcher import cli
from launcher.runtime import commands as runtime_door
from launcher.runtime.train import entrypoint  # noqa: F401  (defines the flags flagsaver restores)

pytestmark = pytest.mark.unit

TPU = ["--accelerator_type=v6e", "--topology=4x4"]
CASES = [
    # (id, program, args, the message)
    (
        "unknown accelerator",
        "train",
        ["--accelerator_type=v7z", "--topology=4x4", "run_name=r"],
        "accelerator_type: unknown TPU accelerator type 'v7z'",
    ),
    (
        "topology of another generation",
        "train",
        ["--accelerator_type=v5p", "--topology=4x4", "run_name=r"],
        "topology: '4x4' is not a v5p topology",
    ),
    (
        "host count mismatch",
        "train",
        [*TPU, "--chips_per_host=8", "run_name=r"],
        "chips_per_host: v6e 4x4 cannot be built from hosts of 8 chips",
    ),
    (
        "parallelism product",
        "train",
        [*TPU, "run_name=r", "ici_fsdp_parallelism=4", "ici_tensor_parallelism=2"],
        "ici parallelism ici_fsdp_parallelism=4 x ici_tensor_parallelism=2 = 8 does not match the "
        "16 devices per slice",
    ),
    (
        "dcn parallelism",
        "train",
        [*TPU, "--num_slices=2", "run_name=r", "dcn_data_parallelism=3"],
        "dcn parallelism dcn_data_parallelism=3 = 3 does not match the 2 slices",
    ),
    (
        "elastic batch cannot be kept",
        "cli",
        ["--tpu=v5p-16", "--num_slices=4", "--min_slices=3", "run_name=r"],
        "min_slices: on 3 of 4 slices the global batch cannot stay the same",
    ),
    (
        "elastic minimum above the slices",
        "train",
        [*TPU, "--num_slices=2", "--min_slices=3", "run_name=r"],
        "min_slices: must be between 1 and --num_slices (2), got 3",
    ),
    (
        "elastic over two dcn axes",
        "train",
        [
            *TPU,
            "--num_slices=4",
            "--min_slices=2",
            "run_name=r",
            "dcn_data_parallelism=2",
            "dcn_fsdp_parallelism=2",
        ],
        "needs exactly one DCN axis that spans the 4 slices",
    ),
    (
        "elastic minimum of zero",
        "train",
        [*TPU, "--min_slices=0", "run_name=r"],
        "min_slices: must be between 1 and --num_slices (1), got 0",
    ),
    (
        "missing output directory",
        "train",
        [*TPU, "run_name=r", "base_output_directory=/no/such"],
        "base_output_directory: /no/such does not exist",
    ),
    (
        "unwritable output directory",
        "train",
        [*TPU, "run_name=r", "base_output_directory=/proc"],
        "base_output_directory: /proc is not writable",
    ),
    (
        "unknown MaxText key",
        "train",
        [*TPU, "run_name=r", "per_device_batchsize=1"],
        "per_device_batchsize: unknown MaxText config key 'per_device_batchsize'",
    ),
    ("missing run name", "train", [*TPU, "steps=3"], "run_name: is required"),
    ("key given twice", "cli", ["run_name=a", "run_name=b"], "run_name: set twice"),
    ("not key=value", "cli", ["run_name"], "must be key=value"),
    (
        "ray address not answering",
        "cli-address",
        ["run_name=r"],
        "address: no Ray dashboard answers at http://127.0.0.1:9",
    ),
    (
        "cpu and tpu slice at once",
        "train",
        [*TPU, "--cpu_hosts=2", "--cpu_devices_per_host=2", "run_name=r"],
        "a CPU slice and a TPU slice",
    ),
    (
        "unknown slice name",
        "cli",
        ["--tpu=v6e-15", "run_name=r"],
        "tpu: unknown TPU type 'v6e-15'.\n  fix: did you mean v6e-8 or v6e-16",
    ),
    (
        "slice name against its long form",
        "train",
        ["--tpu=v6e-16", "--topology=2x4", "run_name=r"],
        "tpu: v6e-16 is TPU v6e 4x4, but",
    ),
]


def _run(program: str, args: list[str], capsys) -> tuple[int, str, str]:
    """One entry point, in this process, as its console script runs it: (exit code, out, err)."""
    if program == "train":
        argv = ["train", "--dry_run", *args]
    elif program == "cli":
        argv = ["submit", "--", *args]
    else:
        argv = ["submit", "--address", "http://127.0.0.1:9", "--", *args]
    with flagsaver.flagsaver():  # `train` parses absl's global flags; leave them as found
        try:
            code = (runtime_door.main if program == "train" else cli.main)(argv)
        except SystemExit as e:  # the absl app exits
            code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _no_cluster_env(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("LAUNCHER_OUTPUT_DIR", "/tmp")


@pytest.mark.parametrize(
    ("program", "args", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_user_error_is_named_with_its_fix(program, args, says, capsys):
    code, out, err = _run(program, args, capsys)
    assert code == 2, out + err
    assert says in err
    assert "fix:" in err and "Traceback" not in err


def test_each_case_has_its_own_message():
    assert len({c[3] for c in CASES}) == len(CASES)


def test_dry_run_of_the_tutorial_job_prints_the_plan(capsys):
    code, out, err = _run(
        "train",
        [
            *TPU,
            "base.yml",
            "model_name=llama3-8b",
            "run_name=seed",
            "ici_fsdp_parallelism=4",
            "ici_tensor_parallelism=4",
        ],
        capsys,
    )
    assert code == 0, err
    assert "v6e-16 (TPU v6e 4x4: 4 hosts x 4 chips): 4 workers x 4 devices = 16 devices" in out
    assert '"resources_per_worker": {"TPU": 4}' in out


def test_flags_of_one_train_run_do_not_leak_into_the_next(capsys):
    """Parse once, per run: a second run without --num_slices plans one slice again."""
    code, _, err = _run("train", [*TPU, "--num_slices=2", "run_name=r"], capsys)
    assert code == 0, err
    code, out, err = _run("train", [*TPU, "run_name=r"], capsys)
    assert code == 0 and "4 workers x 4 devices = 16 devices" in out, out + err


def test_dry_run_of_an_elastic_job_plans_each_size(capsys):
    code, out, err = _run(
        "train",
        ["--tpu=v5p-16", "--num_slices=2", "--min_slices=1", "tiny-llama.yml", "run_name=r"],
        capsys,
    )
    assert code == 0, err
    assert "elastic: runs on 1 to 2 slices" in out
    plan = json.loads(out.strip().splitlines()[-1])
    assert plan["num_workers"] == [2, 4]
    assert plan["sizings"]["1"]["overrides"] == {
        "dcn_data_parallelism": "1",
        "gradient_accumulation_steps": "2",
    }
    assert plan["sizings"]["1"]["global_batch"] == plan["sizings"]["2"]["global_batch"] == 16
