"""The job plan: everything checked before any worker starts, for every entry point."""

from __future__ import annotations

import pytest

from launcher.core.errors import UsageError
from launcher.core.job.checkpoint_tiers import BUCKET, MEMORY
from launcher.core.job.checkpoints import COMMIT_MARKER, committed_steps, resolve_steps
from launcher.core.job.plan import (
    JobOptions,
    parse_job_args,
    plan_job,
)
from launcher.core.job.run_dir import COMPILE_CACHE_SUBDIR, compile_cache_for
from launcher.core.maxtext.args import MaxTextArgs
from launcher.core.release_facts import CpuSlice, ReleaseFacts
from tests.support.ray_nodes import ray_nodes

pytestmark = pytest.mark.unit
TUTORIAL_JOB = [
    "base.yml",
    "model_name=llama3-8b",
    "ici_fsdp_parallelism=4",
    "ici_tensor_parallelism=4",
    "run_name=seed",
]


def test_plans_the_tutorial_job_on_its_cluster(tmp_path):
    plan = plan_job(
        JobOptions(),
        TUTORIAL_JOB,
        nodes=ray_nodes("v6e", "4x4"),
        require_slice=True,
        output_dir=str(tmp_path),
    )
    assert plan.slices.describe() == "v6e-16 (TPU v6e 4x4: 4 hosts x 4 chips)"
    assert plan.args.overrides["base_output_directory"] == str(tmp_path)
    assert plan.run_dir.path == tmp_path / "seed"


def test_explicit_flags_must_match_the_cluster(tmp_path):
    options = JobOptions(accelerator_type="v5p", topology="2x2x2")
    with pytest.raises(UsageError, match="offers v6e-16"):
        plan_job(options, ["run_name=r"], nodes=ray_nodes("v6e", "4x4"), output_dir=str(tmp_path))


def test_default_output_directory_must_exist():
    with pytest.raises(UsageError, match="gcsfuse"):
        plan_job(
            JobOptions(),
            ["run_name=r"],
            nodes=ray_nodes("v6e", "4x4"),
            output_dir="/no/such/bucket/mount",
        )


def test_a_slice_is_required_in_the_cluster_but_not_at_submission():
    with pytest.raises(UsageError, match="no slice given and no Ray cluster"):
        plan_job(JobOptions(), ["run_name=r"], require_slice=True)
    plan = plan_job(JobOptions(), ["run_name=r"])  # submit: the cluster decides later
    assert plan.slices is None and plan.run_name == "r"


def test_a_preflight_target_is_held_to_the_parallelism():
    target = JobOptions(accelerator_type="v6e", topology="4x4").slice_request()
    with pytest.raises(UsageError, match="does not match the 16 devices per slice"):
        plan_job(JobOptions(), ["run_name=r", "ici_fsdp_parallelism=8"], target=target)


def test_job_args_are_parsed_once_into_frozen_options():
    job = parse_job_args(
        ["--accelerator_type=v6e", "--topology=4x4", "--num_slices=2", "base.yml", "run_name=r"]
    )
    options, rest = job.options, list(job.maxtext_argv)
    assert (options.accelerator_type, options.topology, options.num_slices) == ("v6e", "4x4", 2)
    assert rest == ["base.yml", "run_name=r"] and job.words[-2:] == ("base.yml", "run_name=r")
    with pytest.raises(AttributeError):
        options.num_slices = 3  # frozen
    with pytest.raises(AttributeError):
        job.words = ()  # frozen
    with pytest.raises(UsageError, match="Unknown command line flag 'topolgy'"):
        parse_job_args(["--topolgy=4x4"])


def test_the_jobs_flags_may_be_spelled_with_dashes():
    job = parse_job_args(
        ["--max-failures=4", "--num-slices", "2", "--no-metrics", "base.yml", "run-name=r"]
    )
    options, rest = job.options, list(job.maxtext_argv)
    assert (options.max_failures, options.num_slices, options.metrics) == (4, 2, False)
    assert rest == ["base.yml", "run-name=r"]  # MaxText's keys are MaxText's to refuse
    with pytest.raises(UsageError, match="Unknown command line flag 'max-failurez'"):
        parse_job_args(["--max-failurez=4"])


def test_the_release_gives_a_job_what_it_leaves_out():
    """The release's facts fill what the job's flags do not name, on the head as here."""
    release = ReleaseFacts(cpu_slice=CpuSlice(2, 3), checkpoint_tier=MEMORY, known=True)
    job = parse_job_args(["run_name=r"])
    assert job.options.slice_request() is None  # the flags alone name no slice
    options = job.with_release(release)
    assert options.slice_request().describe() == "CPU slice: 2 hosts x 3 devices"
    assert options.checkpoint_tier == MEMORY
    own = parse_job_args(["--cpu_hosts=1", "--cpu_devices_per_host=4", "run_name=r"])
    assert own.with_release(release).slice_request().describe() == "CPU slice: 1 hosts x 4 devices"
    tiered = parse_job_args(["--checkpoint-tier=bucket", "run_name=r"])  # dashes, as typed
    assert tiered.with_release(release).checkpoint_tier == BUCKET
    elastic = ReleaseFacts(min_slices=1, known=True)
    assert parse_job_args(["run_name=r"]).with_release(elastic).min_slices == 1
    assert parse_job_args(["--min_slices=2", "run_name=r"]).with_release(elastic).min_slices == 2


def _commit(step_dir):
    step_dir.mkdir(parents=True)
    (step_dir / COMMIT_MARKER).write_text("ok")


def test_committed_steps_need_orbaxs_commit_marker(tmp_path):
    for step in (0, 5):
        _commit(tmp_path / "checkpoints" / str(step))
    # An interrupted save: Orbax's temporary directory, or a step directory without the marker.
    for name in ("10.orbax-checkpoint-tmp", "7", "_CHECKPOINT_METADATA"):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    assert committed_steps(tmp_path) == [0, 5]


def _run_with_checkpoints(tmp_path, *steps):
    for step in steps:
        _commit(tmp_path / "r" / "checkpoints" / str(step))
    return tmp_path / "r"


def test_refuses_a_rerun_that_would_train_nothing(tmp_path):
    run_dir = _run_with_checkpoints(tmp_path, 0, 5, 9)
    args = MaxTextArgs.parse(["run_name=r", "steps=10"])
    with pytest.raises(UsageError, match=r"(?s)already completed 10 steps .* pass steps=20"):
        resolve_steps(args, run_dir, None)
    assert resolve_steps(MaxTextArgs.parse(["run_name=r", "steps=11"]), run_dir, None)
    assert resolve_steps(MaxTextArgs.parse(["run_name=r", "steps=-1"]), run_dir, None)


def test_steps_beyond_checkpoint_extends_the_run(tmp_path):
    args = resolve_steps(
        MaxTextArgs.parse(["run_name=r"]), _run_with_checkpoints(tmp_path, 0, 5, 39), 40
    )
    assert args.get("steps") == 80
    fresh = resolve_steps(MaxTextArgs.parse(["run_name=r"]), tmp_path / "new", 40)
    assert fresh.get("steps") == 40
    with pytest.raises(UsageError, match="keep one"):
        resolve_steps(MaxTextArgs.parse(["run_name=r", "steps=3"]), tmp_path / "new", 40)


def test_a_job_whose_flags_name_another_slice_than_its_target_is_refused():
    target = JobOptions(accelerator_type="v6e", topology="4x4").slice_request()
    options = JobOptions(accelerator_type="v5p", topology="2x2x2")
    with pytest.raises(UsageError, match=r"asks for v5p-16 .* but its target is v6e-16"):
        plan_job(options, ["run_name=r"], target=target)
    same = JobOptions(accelerator_type="v6e", topology="4x4")
    assert plan_job(same, ["run_name=r"], target=target).slices == target


def test_every_run_in_an_output_directory_shares_one_compilation_cache(tmp_path):
    caches = {
        plan_job(
            JobOptions(), ["tiny-llama.yml", f"run_name={name}"], output_dir=str(tmp_path)
        ).args.overrides["jax_cache_dir"]
        for name in ("r", "another")
    }
    assert caches == {f"{tmp_path}/{COMPILE_CACHE_SUBDIR}"}
    # A bucket URL stays one: a Path would fold gs:// into gs:/.
    assert compile_cache_for("gs://b/runs/") == f"gs://b/runs/{COMPILE_CACHE_SUBDIR}"


def test_a_compilation_cache_the_user_chose_is_kept(tmp_path):
    for chosen in ("jax_cache_dir=/elsewhere", "jax_cache_dir="):  # "" turns the cache off
        plan = plan_job(JobOptions(), ["run_name=r", chosen], output_dir=str(tmp_path))
        assert plan.args.overrides["jax_cache_dir"] == chosen.split("=")[1]


def test_libtpu_flags_reach_every_tpu_host_and_never_a_cpu_one(tmp_path):
    from launcher.runtime.train.entrypoint import worker_env

    flags = "--xla_enable_async_all_gather=true --xla_tpu_enable_async_collective_fusion=true"
    job = parse_job_args([f"--libtpu_init_args={flags}", *TUTORIAL_JOB])
    options, maxtext = job.options, list(job.maxtext_argv)
    plan = plan_job(options, maxtext, nodes=ray_nodes("v6e", "4x4"), output_dir=str(tmp_path))
    assert worker_env(plan) == {"LIBTPU_INIT_ARGS": flags}
    assert worker_env(plan_job(JobOptions(), TUTORIAL_JOB, nodes=ray_nodes("v6e", "4x4"))) == {}
    cpu = plan_job(
        JobOptions(cpu_hosts=2, cpu_devices_per_host=2, libtpu_init_args=flags),
        ["tiny-llama.yml", "run_name=r"],
    )
    assert "LIBTPU_INIT_ARGS" not in worker_env(cpu)
