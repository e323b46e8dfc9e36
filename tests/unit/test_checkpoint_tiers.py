"""The checkpoint tiers (launcher.core.job.checkpoint_tiers): what a job's --checkpoint_tier asks of
MaxText, what it refuses and why, which tier each save went to, what the memory tier needs of
a host and when a release's pods cannot hold it; the hosts' side
(launcher.runtime.train.memory_tier) where it runs without a cluster: the memory volume's directory
per run, the mesh axis Orbax's
copies follow; the summary's line. The tier itself runs in tests/e2e/test_elastic_slices.py."""

from __future__ import annotations

import pytest

from harness.paths import REPO
from launcher.core.errors import UsageError
from launcher.core.job.checkpoint_tiers import (
    BUCKET,
    CONTINUOUS_KEPT,
    MEMORY,
    MEMORY_DIR_ENV,
    HostMemory,
    TierPlan,
    memory_gib_per_host,
    memory_volume_size,
    tier_plan,
)
from launcher.core.job.events import EventKind, format_checkpoint, format_restored, parse
from launcher.core.job.goodput import Attempt, StepPoint, format_saves, saves_by_tier
from launcher.core.job.plan import parse_job_args, plan_job
from launcher.core.release_facts import ReleaseFacts
from launcher.core.values_file import load_values, release_facts
from launcher.runtime.train import memory_tier

pytestmark = pytest.mark.unit

TWO_SLICES = ["--tpu=v5p-8", "--num_slices=2"]


def _args(*words: str, maxtext: tuple[str, ...] = (), capacities: tuple[str, ...] = ()):
    """The job's MaxText arguments as planned, for TPU workers of these capacity items."""
    job = parse_job_args([*words, "tiny-llama.yml", "run_name=r", *maxtext])
    release = ReleaseFacts(capacities=capacities)
    return plan_job(job.options, list(job.maxtext_argv), release=release).args


def test_the_memory_tier_turns_on_maxtexts_emergency_checkpointing():
    args = _args("--checkpoint_tier=memory", *TWO_SLICES)
    assert args.get("enable_emergency_checkpoint") is True
    # tiny-llama.yml saves every 5 steps: to memory every step, a fifth of the period.
    assert args.get("local_checkpoint_period") == 1
    plan = tier_plan(args)
    assert (plan.tier, plan.memory_period, plan.bucket_period) == (MEMORY, 1, 5)
    given = _args(
        "--checkpoint_tier=memory", *TWO_SLICES,
        maxtext=("checkpoint_period=20", "local_checkpoint_period=3"),
    )  # fmt: skip
    assert tier_plan(given) == TierPlan(MEMORY, 3, 20)
    assert tier_plan(_args(*TWO_SLICES)) == TierPlan(BUCKET, None, 5)
    assert "enable_emergency_checkpoint" not in _args(*TWO_SLICES).overrides


@pytest.mark.parametrize(
    ("words", "maxtext", "said"),
    [
        (("--checkpoint_tier=memory", "--tpu=v5p-8"), (), "two slices or more"),
        (("--checkpoint_tier=multi-tier", *TWO_SLICES), (), "JobSet"),
        ((*TWO_SLICES,), ("enable_multi_tier_checkpointing=true",), "JobSet"),
        (("--checkpoint_tier=memory", *TWO_SLICES, "--min_slices=1"), (), "--min_slices"),
        (("--checkpoint_tier=memory", *TWO_SLICES), ("local_checkpoint_period=5",),
         "no more often than the bucket"),
    ],
)  # fmt: skip
def test_what_the_memory_tier_cannot_do_is_refused_with_the_reason(words, maxtext, said):
    with pytest.raises(UsageError) as refusal:
        _args(*words, maxtext=maxtext)
    assert said in str(refusal.value) and refusal.value.fix


def test_a_job_takes_the_release_tier_unless_it_names_its_own():
    job = parse_job_args([*TWO_SLICES, "tiny-llama.yml", "run_name=r"])
    release = ReleaseFacts(checkpoint_tier=MEMORY, known=True)
    assert job.with_release(release).checkpoint_tier == MEMORY
    own = parse_job_args(["--checkpoint-tier=bucket", *TWO_SLICES, "tiny-llama.yml", "run_name=r"])
    assert own.with_release(release).checkpoint_tier == BUCKET


def test_each_save_is_said_with_its_tier():
    plan = TierPlan(MEMORY, 2, 10)
    assert [plan.tier_of_save(s) for s in (0, 2, 8, 10, 12)] == [
        BUCKET, MEMORY, MEMORY, BUCKET, MEMORY,
    ]  # fmt: skip
    # A forced save (the last step's, a notice's) goes to the bucket from the first slice too.
    assert plan.tier_of_save(13, forced=True) == BUCKET
    assert TierPlan(BUCKET, None, 10).tier_of_save(3) == BUCKET
    for line in (format_checkpoint(4, MEMORY), format_checkpoint(10, BUCKET), format_checkpoint(3)):
        event = parse(line)
        assert event is not None and event.kind is EventKind.CHECKPOINT, line
    restored = parse(format_restored(12, "memory (slice 1's hosts)"))
    assert restored is not None and restored.fields["restored"] == "12"
    assert restored.fields["source"] == "memory (slice 1's hosts)"


def test_the_memory_a_host_needs_and_when_the_pods_cannot_hold_it():
    # MaxText's guide: 2 x (checkpoint / hosts) x 1.15.
    assert memory_gib_per_host(10.0) == pytest.approx(23.0)
    assert memory_volume_size(10.0) == "23Gi" and memory_volume_size(0.01) == "1Gi"
    assert HostMemory(MEMORY, 32.0, 186.0, known=True).refusal(10.0) is None
    small = HostMemory(MEMORY, 16.0, 186.0, known=True).refusal(10.0)
    assert small is not None and "checkpoints.memorySize=23Gi" in small.fix
    tight = HostMemory(MEMORY, None, 20.0, known=True).refusal(10.0)
    assert tight is not None and tight.field == "ray.worker.resources.limits.memory"


def test_the_values_say_the_release_tier_and_its_pods_memory():
    chart = REPO / "charts" / "tpu-stack" / "values.yaml"
    values = load_values(chart, REPO / "values" / "v6e-16.yaml")
    plain = release_facts(values, "tpu").host_memory
    values["checkpoints"] = {"tier": "memory", "memorySize": "64Gi"}
    values["ray"]["worker"]["resources"]["limits"]["memory"] = "200G"
    host = release_facts(values, "tpu").host_memory
    assert host.tier == MEMORY and host.volume_gib == 64.0
    assert host.limit_gib == pytest.approx(200e9 / 2**30)
    assert (plain.tier, plain.volume_gib, plain.known) == (BUCKET, None, True)
    # A job on the memory tier for a release that mounts no volume: refused before it costs.
    none = plain.refusal(1.0)
    assert none is not None and "checkpoints.tier=memory" in none.fix
    assert HostMemory().refusal(1.0) is None  # no release to hold it to


def test_a_host_keeps_each_runs_copies_apart_and_drops_other_runs(tmp_path, monkeypatch):
    volume = tmp_path / "memory"
    (volume / "old-run" / "12").mkdir(parents=True)
    (volume / "r" / "14").mkdir(parents=True)
    monkeypatch.setenv(MEMORY_DIR_ENV, str(volume))
    argv = ["train", "tiny-llama.yml", "run_name=r", "enable_emergency_checkpoint=true"]
    assert memory_tier.uses_memory_tier(argv)
    on_cpu = memory_tier.host_argv(argv, slices=2, cpu_devices=True)
    assert f"local_checkpoint_directory={volume / 'r'}" in on_cpu
    assert "ici_data_parallelism=2" in on_cpu  # the slices as the data axis, as DCN makes them
    assert not (volume / "old-run").exists() and (volume / "r" / "14").is_dir()
    assert "ici_data_parallelism=2" not in memory_tier.host_argv(argv, 2, cpu_devices=False)
    monkeypatch.delenv(MEMORY_DIR_ENV)
    with pytest.raises(memory_tier.MemoryTierError, match=r"checkpoints.tier=memory"):
        memory_tier.host_argv(argv, 2, cpu_devices=False)


def test_orbax_copies_follow_the_mesh_axis_of_whole_hosts():
    import jax
    import numpy as np

    devices = np.array(jax.devices()[:1]).reshape(1, 1)
    one = jax.sharding.Mesh(devices, ("diloco", "data"))
    with pytest.raises(memory_tier.MemoryTierError, match="one data replica"):
        memory_tier.replica_axis(one)
    with pytest.raises(memory_tier.MemoryTierError, match="no data axis"):
        memory_tier.replica_axis(jax.sharding.Mesh(devices, ("diloco", "fsdp")))


def test_the_summary_says_each_tiers_saves_and_what_they_blocked():
    def steps(*seconds: float) -> list[StepPoint]:
        return [StepPoint(n, s, 100.0 + n, 1.0, 1.0) for n, s in enumerate(seconds)]

    attempt = Attempt(started_at=0.0, steps=steps(5, 1, 1, 1.5, 1, 3, 1, 1))
    attempt.checkpoints = [(2, 0.0), (4, 0.0)]
    attempt.memory_saves = [2]
    saves = saves_by_tier([attempt])
    # After the memory save at 2, step 3 took 0.5 s beyond a steady step; after the bucket's
    # at 4, step 5 took 2 s beyond it.
    assert saves == {
        "memory": {"saves": 1, "blocked_seconds": 0.5},
        "bucket": {"saves": 1, "blocked_seconds": 2.0},
    }
    line = format_saves(saves, [None, "memory (slice 1's hosts)"])
    assert line is not None and "1 to memory (0.5s blocked" in line
    assert "restored: start 2 from memory (slice 1's hosts)" in line
    assert format_saves({"bucket": {"saves": 3, "blocked_seconds": 1.0}}, [None]) is None


def test_continuous_checkpointing_is_on_by_default_where_a_reclaim_loses_steps():
    for capacities in (("spot",), ("flex-start",), ("reservation:r", "spot")):
        args = _args(*TWO_SLICES, capacities=capacities)
        assert args.get("enable_continuous_checkpointing") is True, capacities
        assert args.get("max_num_checkpoints_to_keep") == CONTINUOUS_KEPT  # bounded
    for capacities in ((), ("on-demand",), ("reservation:r",)):
        args = _args(*TWO_SLICES, capacities=capacities)
        assert "enable_continuous_checkpointing" not in args.overrides, capacities
    # Asked for, or kept off; the job's own bound kept; not beside the memory tier.
    on = _args(
        "--continuous_checkpointing=on", *TWO_SLICES, maxtext=("max_num_checkpoints_to_keep=7",)
    )
    assert on.get("enable_continuous_checkpointing") is True
    assert on.get("max_num_checkpoints_to_keep") == 7
    off = _args("--continuous_checkpointing=off", *TWO_SLICES, capacities=("spot",))
    assert "enable_continuous_checkpointing" not in off.overrides
    memory = _args("--checkpoint_tier=memory", *TWO_SLICES, capacities=("spot",))
    assert "enable_continuous_checkpointing" not in memory.overrides
    with pytest.raises(UsageError, match="memory tier"):
        _args("--continuous_checkpointing=on", "--checkpoint_tier=memory", *TWO_SLICES)


def test_a_second_start_in_a_process_wraps_the_librarys_function_not_the_first_wrap():
    from types import SimpleNamespace

    from launcher.runtime.borrowed import rewrap

    library = SimpleNamespace(save=lambda step: [step])

    def said_by(start):
        def make(original):
            return lambda step: [*original(step), start]

        return make

    rewrap(library, "save", said_by("start 1"))
    rewrap(library, "save", said_by("start 2"))
    assert library.save(3) == [3, "start 2"]  # the first start's callback is gone
