"""`make generate` end to end on the real local Ray cluster: a run trained by `tpu-launcher
train`, then MaxText's inference engine on both simulated hosts (jax.distributed over 2
processes x 4 CPU devices) loading the run's committed checkpoint. The tiny model's text is
nonsense; what is asserted is the path: the checkpoint named, tokens generated, the same seed
giving the same tokens, and another checkpoint giving others."""

from __future__ import annotations

import pytest

from tests.support.local_ray import launcher_result, run_name

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_generates_from_the_runs_latest_checkpoint_deterministically(local_cluster):
    name = run_name("gen")
    code, out = local_cluster.submit("tiny-llama.yml", f"run_name={name}", "steps=8")
    assert code == 0, out[-6000:]
    assert launcher_result(out)["checkpoints"] == [0, 5, 7]

    options = ("--prompt", 'say "hello"', "--max-tokens", "12", "--seed", "7")
    code, out = local_cluster.generate(name, *options)
    assert code == 0, out[-6000:]
    first = launcher_result(out)
    assert (first["run"], first["step"]) == (name, 7), "not the latest committed checkpoint"
    assert first["prompt_ids"] == list(b'say "hello"')
    assert len(first["token_ids"]) == 12 and all(0 <= t < 256 for t in first["token_ids"])
    # What a user reads: the checkpoint, the slice, the text; not MaxText's config dump.
    assert f"generate from run {name}, checkpoint step 7" in out
    assert "2 workers x 4 devices" in out and "generated:  " in out
    assert "Config param" not in out and len(out.splitlines()) <= 25, out

    code, out = local_cluster.generate(name, *options)
    assert code == 0, out[-6000:]
    assert launcher_result(out)["token_ids"] == first["token_ids"], "same seed, other tokens"

    code, out = local_cluster.generate(name, *options, "--step", "0")
    assert code == 0, out[-6000:]
    at_step_0 = launcher_result(out)
    assert at_step_0["step"] == 0
    assert at_step_0["token_ids"] != first["token_ids"], (
        "the checkpoint's parameters made no difference"
    )


def test_a_run_without_checkpoints_is_named_with_the_fix(local_cluster):
    code, out = local_cluster.generate("no-such-run", "--prompt", "hi")
    assert code == 1, out[-4000:]
    assert "run 'no-such-run' has no committed checkpoint" in out
    assert "fix: train it first" in out
