"""MaxText argv: passed through unchanged, checked before any worker starts."""

from __future__ import annotations

import pytest

from harness.tutorial import TUTORIAL_ARGV
from launcher.core.errors import UsageError
from launcher.core.maxtext.args import (
    MaxTextArgs,
    check_output_directory,
    maxtext_configs_dir,
)

pytestmark = pytest.mark.unit

# The GKE tutorial's exact job arguments (v6e-16, fsdp 4 x tensor 4).
TUTORIAL = TUTORIAL_ARGV


def test_passes_the_tutorial_arguments_through_unchanged():
    args = MaxTextArgs.parse(TUTORIAL)
    assert args.config == (maxtext_configs_dir() / "base.yml").resolve()
    assert args.argv()[2:] == TUTORIAL[1:]
    args.check_parallelism(devices_per_slice=16, num_slices=1, slice_desc="v6e-16")


def test_resolves_configs_by_name_and_from_the_launcher():
    assert MaxTextArgs.parse([]).config.name == "base.yml"
    assert MaxTextArgs.parse(["models/llama3-8b.yml"]).config.name == "llama3-8b.yml"
    tiny = MaxTextArgs.parse(["tiny-llama.yml", "run_name=x"])
    assert tiny.get("base_emb_dim") == 64  # from our config
    assert tiny.get("ici_fsdp_parallelism") == -1  # from MaxText's base.yml under it


def test_defaults_never_override_what_the_user_set():
    args = MaxTextArgs.parse(["base_output_directory=/mine", "run_name=r"])
    merged = args.with_defaults(base_output_directory="/data", enable_checkpointing=True)
    assert merged.overrides["base_output_directory"] == "/mine"
    assert merged.overrides["enable_checkpointing"] == "true"


@pytest.mark.parametrize(
    ("argv", "field", "says"),
    [
        (["run_nam=x"], "run_nam", "did you mean run_name"),
        (["steps=1", "steps=2"], "steps", "set twice"),
        (["steps"], "steps", "must be key=value"),
        # A pasted newline or tab: the chart refuses the same in ray.job.args.
        (["run_name=r\n", "steps=5"], "run_name=r\n", "holds a control character"),
        (["steps=5\t"], "steps=5\t", "holds a control character"),
        (["no-such.yml"], "config", "not found"),
        # Kinds as MaxText's config model (configs/types.py) declares them.
        (["per_device_batch_size=abc"], "per_device_batch_size", "is not a number"),
        (["steps=abc"], "steps", "is not a whole number"),
        (["steps=1.5"], "steps", "is not a whole number"),
        (["enable_checkpointing=maybe"], "enable_checkpointing", "is not true or false"),
        (["learning_rate=-1.0"], "learning_rate", "is not a number >= 0"),
        (["attention_type=sparse"], "attention_type", "one of: global, local_sliding"),
        # Choices MaxText declares as an Enum (DatasetType) and a Literal alias (ModelName).
        (["dataset_type=hff"], "dataset_type", "did you mean dataset_type=hf?"),
        (["model_name=llama3-7b"], "model_name", "did you mean model_name=llama3-70b or llama3-8b"),
    ],
)
def test_refuses_bad_arguments_with_the_key_and_the_fix(argv, field, says):
    with pytest.raises(UsageError) as err:
        MaxTextArgs.parse(argv)
    assert err.value.field == field
    assert says in str(err.value)


@pytest.mark.parametrize(
    "value",
    [
        "per_device_batch_size=0.5",  # int | float: a fraction of a batch per device
        "steps=-1",
        "steps=150_001",
        "learning_rate=3.e-5",
        "learning_rate=1e-4",  # YAML reads it as text; MaxText's float field takes it
        "enable_checkpointing=false",
        "dataset_type=synthetic",  # a str: left to MaxText
    ],
)
def test_values_of_the_declared_kind_pass(value):
    assert MaxTextArgs.parse([value]).overrides


def test_requires_a_run_name_so_a_rerun_can_resume():
    with pytest.raises(UsageError, match="resumes from its latest checkpoint"):
        MaxTextArgs.parse(["steps=3"]).check_required()


@pytest.mark.parametrize(
    ("overrides", "devices", "slices", "says"),
    [
        (["ici_fsdp_parallelism=4", "ici_tensor_parallelism=8"], 16, 1, "= 32 does not match"),
        (["ici_fsdp_parallelism=-1", "ici_tensor_parallelism=3"], 16, 1, "and a -1 axis"),
        (["ici_fsdp_parallelism=-1", "ici_data_parallelism=-1"], 16, 1, "more than one ici"),
        (["ici_fsdp_parallelism=0"], 16, 1, "positive integer or -1"),
        (["dcn_data_parallelism=1"], 16, 2, "does not match the 2 slices"),
    ],
)
def test_refuses_parallelism_that_does_not_fit_the_slice(overrides, devices, slices, says):
    args = MaxTextArgs.parse(["run_name=r", *overrides])
    with pytest.raises(UsageError, match=says):
        args.check_parallelism(devices, slices, "test slice")


def test_accepts_a_fill_axis_that_divides_the_slice():
    args = MaxTextArgs.parse(["ici_tensor_parallelism=4", "dcn_data_parallelism=-1"])
    args.check_parallelism(devices_per_slice=16, num_slices=2, slice_desc="2 x v6e-16")


def test_output_directory_must_exist_and_be_writable(tmp_path):
    check_output_directory(str(tmp_path))
    check_output_directory("gs://bucket/prefix")  # left to the storage client
    with pytest.raises(UsageError, match="does not exist"):
        check_output_directory(str(tmp_path / "missing"))
    # /proc refuses new files even to root, so this holds whoever runs the tests.
    with pytest.raises(UsageError, match="not writable"):
        check_output_directory("/proc")
