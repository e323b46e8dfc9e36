"""What MaxText is told on each number of slices an elastic job may get: the DCN axis sized to
the slices it got, gradient accumulation raised so the global batch stays the same, and on the
local cluster's simulated slices the DCN axis folded into ICI (MaxText counts one slice there)."""

from __future__ import annotations

import pytest
from ray.train.v2._internal.constants import (
    DEFAULT_WORKER_GROUP_START_TIMEOUT_S,
    ENV_VARS_TO_PROPAGATE,
    WORKER_GROUP_START_TIMEOUT_S_ENV_VAR,
)

from launcher.core.errors import UsageError
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.tpu import slices as slices_mod
from launcher.core.tpu.elastic import (
    ELASTIC_GROUP_START_TIMEOUT_S,
    GROUP_START_TIMEOUT_ENV,
    shorten_group_start_wait,
    sizings,
)

pytestmark = pytest.mark.unit

V5P_16 = slices_mod.from_flags(None, None, 2, None, None, None, tpu="v5p-16")  # 2 x (2 x 4)


def _args(*overrides: str) -> MaxTextArgs:
    return MaxTextArgs.parse(["tiny-llama.yml", "run_name=r", *overrides])


def test_fewer_slices_keep_the_global_batch_by_accumulating():
    sized = sizings(_args(), V5P_16, 1, allow_changing_batch=False)
    assert sorted(sized) == [1, 2]
    one, two = sized[1], sized[2]
    # 8 devices per slice x per_device_batch_size 1: 16 sequences on 2 slices, and on 1.
    assert one.global_batch == two.global_batch == 16
    assert one.overrides == {"dcn_data_parallelism": "1", "gradient_accumulation_steps": "2"}
    assert two.overrides == {"dcn_data_parallelism": "2"}


def test_simulated_slices_fold_the_dcn_axis_into_ici():
    sized = sizings(_args("ici_fsdp_parallelism=-1"), V5P_16, 1, allow_changing_batch=False)
    # MaxText sees one slice of all the CPU devices: data over slices is data over devices.
    folded = sized[2].simulated_overrides
    assert folded["ici_data_parallelism"] == "2" and folded["ici_fsdp_parallelism"] == "8"
    assert folded["dcn_data_parallelism"] == "1"
    assert sized[1].simulated_overrides["ici_data_parallelism"] == "1"
    assert sized[1].simulated_overrides["gradient_accumulation_steps"] == "2"


def test_user_accumulation_is_multiplied_not_replaced():
    four = slices_mod.from_flags(None, None, 4, None, None, None, tpu="v5p-16")
    sized = sizings(_args("gradient_accumulation_steps=3"), four, 2, allow_changing_batch=False)
    assert {n: s.overrides.get("gradient_accumulation_steps", "3") for n, s in sized.items()} == {
        2: "6",
        3: "4",
        4: "3",
    }
    assert {s.global_batch for s in sized.values()} == {96}


def test_a_size_that_cannot_keep_the_batch_is_refused_with_a_batch_that_can():
    four = slices_mod.from_flags(None, None, 4, None, None, None, tpu="v5p-16")
    with pytest.raises(UsageError) as e:
        sizings(_args(), four, 3, allow_changing_batch=False)
    assert "on 3 of 4 slices" in e.value.problem
    # 3 x 4 = 12 divides by 3 and by 4.
    assert (
        "gradient_accumulation_steps=3" in e.value.fix and "--allow_changing_batch" in e.value.fix
    )


def test_allowing_a_changing_batch_shrinks_it_on_that_size_only():
    four = slices_mod.from_flags(None, None, 4, None, None, None, tpu="v5p-16")
    sized = sizings(_args(), four, 3, allow_changing_batch=True)
    assert sized[4].global_batch == 32 and sized[3].global_batch == 24  # 4 // 3 = 1 step


def test_a_fixed_size_job_is_told_nothing_new():
    one = slices_mod.from_flags(None, None, 1, None, None, None, tpu="v6e-16")
    sized = sizings(_args(), one, 1, allow_changing_batch=False)
    assert sized[1].overrides == {} and sized[1].simulated_overrides == {}


def test_elastic_scaling_config_is_a_range_of_whole_slices():
    sc = V5P_16.scaling_config(min_slices=1, resize_check_s=5)
    assert sc.num_workers == (2, 4) and sc.elastic_resize_monitor_interval_s == 5
    assert V5P_16.scaling_config().num_workers == 4


def test_a_fixed_size_job_keeps_any_dcn_split_and_folds_it_on_simulated_slices():
    args = _args("dcn_data_parallelism=1", "dcn_fsdp_parallelism=2", "ici_fsdp_parallelism=-1")
    sized = sizings(args, V5P_16, 2, allow_changing_batch=False)
    assert list(sized) == [2] and sized[2].overrides == {}
    folded = sized[2].simulated_overrides
    assert folded["ici_fsdp_parallelism"] == "16" and folded["dcn_fsdp_parallelism"] == "1"
    assert folded["ici_data_parallelism"] == "1"


def test_an_elastic_job_waits_less_for_a_size_it_cannot_get_and_a_users_wait_wins():
    environ: dict[str, str] = {}
    shorten_group_start_wait(1, 2, environ)
    assert environ == {GROUP_START_TIMEOUT_ENV: str(ELASTIC_GROUP_START_TIMEOUT_S)}
    assert ELASTIC_GROUP_START_TIMEOUT_S < DEFAULT_WORKER_GROUP_START_TIMEOUT_S
    fixed: dict[str, str] = {}
    shorten_group_start_wait(2, 2, fixed)
    assert fixed == {}
    users = {GROUP_START_TIMEOUT_ENV: "300"}
    shorten_group_start_wait(1, 4, users)
    assert users[GROUP_START_TIMEOUT_ENV] == "300"
    # The name Ray Train reads, and hands from the driver to its controller.
    assert GROUP_START_TIMEOUT_ENV == WORKER_GROUP_START_TIMEOUT_S_ENV_VAR
    assert GROUP_START_TIMEOUT_ENV in ENV_VARS_TO_PROPAGATE
