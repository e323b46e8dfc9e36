"""The entrypoint's plan: everything checked before any worker starts."""

from __future__ import annotations

import pytest

from launcher import train
from launcher.errors import UsageError
from tests.unit.test_slices import ray_nodes


@pytest.fixture
def flags_reset():
    saved = {n: train.FLAGS[n].value for n in ("accelerator_type", "topology", "num_slices")}
    yield train.FLAGS
    for name, value in saved.items():
        setattr(train.FLAGS, name, value)


def test_plans_the_seed_job_on_the_seed_cluster(tmp_path, monkeypatch, flags_reset):
    monkeypatch.setenv(train.OUTPUT_DIR_ENV, str(tmp_path))
    seed = ["prog", "base.yml", "model_name=llama3-8b", "ici_fsdp_parallelism=4",
            "ici_tensor_parallelism=4", "run_name=seed"]
    chosen, args = train.plan(seed, ray_nodes("v6e", "4x4"))
    assert chosen.describe() == "v6e-16 (TPU v6e 4x4: 4 hosts x 4 chips)"
    assert args.overrides["base_output_directory"] == str(tmp_path)


def test_explicit_flags_must_match_the_cluster(tmp_path, monkeypatch, flags_reset):
    monkeypatch.setenv(train.OUTPUT_DIR_ENV, str(tmp_path))
    flags_reset.accelerator_type, flags_reset.topology = "v5p", "2x2x2"
    with pytest.raises(UsageError, match="offers v6e-16"):
        train.plan(["prog", "run_name=r"], ray_nodes("v6e", "4x4"))


def test_default_output_directory_must_exist(monkeypatch, flags_reset):
    monkeypatch.setenv(train.OUTPUT_DIR_ENV, "/no/such/bucket/mount")
    with pytest.raises(UsageError, match="gcsfuse"):
        train.plan(["prog", "run_name=r"], ray_nodes("v6e", "4x4"))


def test_committed_checkpoints_skip_unfinished_saves(tmp_path):
    for name in ("0", "5", "10.orbax-checkpoint-tmp", "_CHECKPOINT_METADATA"):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    assert train.committed_checkpoints(tmp_path) == [0, 5]


def _run_with_checkpoints(tmp_path, *steps):
    for step in steps:
        (tmp_path / "r" / "checkpoints" / str(step)).mkdir(parents=True)
    return tmp_path / "r"


def test_refuses_a_rerun_that_would_train_nothing(tmp_path, flags_reset):
    run_dir = _run_with_checkpoints(tmp_path, 0, 5, 9)
    args = train.MaxTextArgs.parse(["run_name=r", "steps=10"])
    with pytest.raises(UsageError, match=r"(?s)already completed 10 steps .* pass steps=20"):
        train.check_steps(args, run_dir)
    assert train.check_steps(train.MaxTextArgs.parse(["run_name=r", "steps=11"]), run_dir)
    assert train.check_steps(train.MaxTextArgs.parse(["run_name=r", "steps=-1"]), run_dir)


def test_steps_beyond_checkpoint_extends_the_run(tmp_path, flags_reset, monkeypatch):
    monkeypatch.setattr(train.FLAGS, "steps_beyond_checkpoint", 40)
    args = train.check_steps(train.MaxTextArgs.parse(["run_name=r"]),
                             _run_with_checkpoints(tmp_path, 0, 5, 39))
    assert args.get("steps") == 80
    fresh = train.check_steps(train.MaxTextArgs.parse(["run_name=r"]), tmp_path / "new")
    assert fresh.get("steps") == 40
    with pytest.raises(UsageError, match="keep one"):
        train.check_steps(train.MaxTextArgs.parse(["run_name=r", "steps=3"]), tmp_path / "new")
