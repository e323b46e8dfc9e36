"""What travels with a job (`submit`): a config of the user's own, its local parents, or a
--working-dir; bounded, listed, and the job's arguments renamed to the shipped copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.client.jobs import files as job_files
from launcher.client.jobs.files import plan_shipment
from launcher.core.errors import UsageError
from launcher.core.maxtext.args import LAUNCHER_CONFIGS_DIR, resolve_config

pytestmark = pytest.mark.unit


def _ship(tmp_path: Path, job_args: list[str], working_dir: str | None = None):
    maxtext = [a for a in job_args if not a.startswith("--")]
    staging = tmp_path / "staging"
    staging.mkdir(exist_ok=True)
    return plan_shipment(job_args, maxtext, resolve_config(maxtext[0]), working_dir, staging)


def test_a_config_in_the_image_ships_nothing(tmp_path):
    shipment = _ship(tmp_path, ["--tpu=v5p-16", "tiny-llama.yml", "run_name=r"])
    assert shipment.directory is None and shipment.describe() == []
    assert shipment.job_args == ["--tpu=v5p-16", "tiny-llama.yml", "run_name=r"]


def test_a_config_of_your_own_ships_with_its_local_parent(tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "configs").mkdir(parents=True)
    (work / "configs" / "parent.yml").write_text("base_config: base.yml\nsteps: 7\n")
    (work / "configs" / "my-model.yml").write_text("base_config: parent.yml\nsteps: 9\n")
    monkeypatch.chdir(work)
    shipment = _ship(tmp_path, ["--tpu=v5p-16", "configs/my-model.yml", "run_name=r"])
    assert shipment.directory == tmp_path / "staging"
    # MaxText's base.yml stays behind (the image has it); the file is named as shipped.
    assert sorted(p for p, _ in shipment.files) == ["my-model.yml", "parent.yml"]
    assert shipment.job_args == ["--tpu=v5p-16", "my-model.yml", "run_name=r"]
    assert (tmp_path / "staging" / "my-model.yml").read_text().endswith("steps: 9\n")
    assert "2 files" in shipment.describe()[0]


def test_a_working_dir_ships_whole_and_names_the_config_inside_it(tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / ".git").mkdir()
    (work / ".git" / "HEAD").write_text("ref")
    (work / "my-model.yml").write_text("base_config: base.yml\n")
    (work / "data" / "prep.py").write_text("print(1)\n")
    monkeypatch.chdir(tmp_path)
    shipment = _ship(tmp_path, ["work/my-model.yml", "run_name=r"], working_dir=str(work))
    assert shipment.directory == work
    assert [p for p, _ in shipment.files] == ["my-model.yml", "data/prep.py"] or sorted(
        p for p, _ in shipment.files
    ) == ["data/prep.py", "my-model.yml"]
    assert ".git/HEAD" not in {p for p, _ in shipment.files}
    assert shipment.job_args == ["my-model.yml", "run_name=r"]


def test_a_config_outside_the_working_dir_is_refused_with_the_fix(tmp_path, monkeypatch):
    (tmp_path / "my-model.yml").write_text("base_config: base.yml\n")
    (tmp_path / "code").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as e:
        _ship(tmp_path, ["my-model.yml", "run_name=r"], working_dir="code")
    assert "outside" in str(e.value) and "move it into" in str(e.value)


def test_too_much_to_ship_is_refused_naming_the_largest_files(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "my-model.yml").write_text("base_config: base.yml\n")
    (work / "weights.bin").write_bytes(b"\0" * 2048)
    monkeypatch.setattr(job_files, "MAX_BYTES", 1024)
    monkeypatch.chdir(work)
    with pytest.raises(UsageError) as e:
        _ship(tmp_path, ["my-model.yml", "run_name=r"], working_dir=".")
    assert "weights.bin 2.0 KiB" in str(e.value) and "bucket" in str(e.value)


def test_launcher_configs_count_as_in_the_image():
    assert job_files._in_image((LAUNCHER_CONFIGS_DIR / "tiny-llama.yml").resolve())
