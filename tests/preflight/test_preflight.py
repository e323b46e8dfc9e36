"""Preflight compiles the job ahead of time for the target TPU (libtpu on this CPU machine) and
answers whether it fits, before any TPU-hour is paid for."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.local_ray import tpu_launcher
from harness.paths import REPO
from harness.tutorial import TUTORIAL_JOB_ARGS
from launcher.core.child_process import ends_with_this_process
from launcher.core.job.checkpoint_tiers import memory_gib_per_host, memory_volume_size
from launcher.core.job.plan import parse_job_args
from launcher.preflight.advice_report import PASTE_HERE
from launcher.preflight.save_estimate import MEMORY_GIB_PER_S, SAVE_GIB_PER_S

pytestmark = [pytest.mark.preflight, pytest.mark.timeout(900)]
TUTORIAL_JOB = ["base.yml", *TUTORIAL_JOB_ARGS]


def preflight(*args: str) -> subprocess.CompletedProcess:
    return tpu_launcher("preflight", *args)


def _gib(output: str, row: str) -> float:
    return float(re.search(rf"{re.escape(row)}\s+([-\d.]+) GiB", output)[1])


def test_the_tutorial_job_fits_a_v6e_16_with_its_memory_figures():
    first = preflight("--values", "values/v6e-16.yaml", "--", *TUTORIAL_JOB)
    assert first.returncode == 0, first.stdout + first.stderr
    out = first.stdout
    assert "per-chip memory of one training step on v6e-16" in out and "verdict: fits" in out
    # llama3-8b, fsdp 4 x tensor 4: about 8e9 params x (4 B weights + 8 B Adam) / 16 chips.
    assert 4 < _gib(out, "parameters + optimizer state") < 8
    assert 0 < _gib(out, "temporaries (activations, gradients)") < 20
    assert _gib(out, "HBM per chip (v6e-16)") == 32
    assert _gib(out, "margin") > 0
    # The save on a preemption notice: each host writes its 4 chips' state; the 30 s grace
    # period of the chart's default, 5 s of it the hook's, is short for 22 GiB at 1 GiB/s.
    save = re.search(r"\(([\d.]+) GiB in all, ([\d.]+) GiB per host\)", out)
    per_host = 4 * _gib(out, "parameters + optimizer state")
    assert save and float(save[2]) == pytest.approx(per_host, abs=0.02), out
    assert float(save[1]) == pytest.approx(4 * per_host, abs=0.05)  # 4 hosts: one copy
    assert "30s (values/v6e-16.yaml)" in out
    assert "TOO SHORT" in out and "ray.worker.terminationGracePeriodSeconds: 50" in out
    # Each checkpoint tier's save and restore per host, and the memory tier's need per host:
    # two copies of the host's share, plus 15% (launcher.core.job.checkpoint_tiers).
    bucket = re.search(r"bucket \(this job\)\s+save about (\d+)s .* restore about (\d+)s", out)
    memory = re.search(r"memory\s+save about ([\d.]+)s .*?([\d.]+) GiB of memory per host", out)
    assert bucket and memory, out
    assert int(bucket[1]) == round(per_host / SAVE_GIB_PER_S)
    assert float(memory[1]) == pytest.approx(per_host / MEMORY_GIB_PER_S, abs=0.06)
    assert float(memory[2]) == pytest.approx(memory_gib_per_host(per_host), abs=0.06)

    started = time.monotonic()
    again = preflight("--values", "values/v6e-16.yaml", "--", *TUTORIAL_JOB)
    elapsed = time.monotonic() - started
    assert again.returncode == 0 and "cached:" in again.stdout
    assert _gib(again.stdout, "total") == _gib(out, "total")
    assert elapsed < 30, "a cached preflight must not compile again"


def test_a_memory_tier_the_release_cannot_hold_is_refused_with_the_size(tmp_path):
    """The tutorial's 8B on two v6e-16 slices, the memory tier with a volume too small for its
    copies: refused after the compile measured the state, with the size that holds them."""
    values = tmp_path / "memory.yaml"
    values.write_text("checkpoints: {tier: memory, memorySize: 16Gi}\n")
    out = preflight(
        "--values", "values/v6e-16-x2.yaml", "--values", str(values), "--", *TUTORIAL_JOB
    )
    assert out.returncode != 0, out.stdout
    assert "memory (this job)" in out.stdout and "to memory every" in out.stdout, out.stdout
    said = out.stdout + out.stderr
    per_host = 4 * _gib(out.stdout, "parameters + optimizer state")
    assert "checkpoints.memorySize: the release's in-memory volume holds 16.0 GiB" in said, said
    assert f"--set checkpoints.memorySize={memory_volume_size(per_host)}" in said, said


def test_the_tutorial_job_fits_a_tpu7x_16_per_device_and_per_chip():
    """Ironwood's two TensorCores per chip are two JAX devices, each with half the chip's 192 GiB
    (Cloud TPU: TPU7x (Ironwood)): tpu7x-16 has the 16 devices the tutorial's fsdp 4 x tensor 4
    splits, and the fit compares a device's bytes with a device's HBM."""
    out = preflight("--values", "values/tpu7x-16.yaml", "--", *TUTORIAL_JOB)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "per-device memory of one training step on tpu7x-16" in text, text
    assert "verdict: fits" in text
    assert _gib(text, "HBM per device (tpu7x-16)") == 96
    assert _gib(text, "HBM per chip") == 192
    per_device = _gib(text, "total")
    assert _gib(text, "total per chip (2 devices)") == pytest.approx(2 * per_device, abs=0.02)
    # The same 16-way split of the same model as on v6e-16: about the same bytes per device.
    assert 4 < _gib(text, "parameters + optimizer state") < 8


def test_a_job_too_big_for_its_slice_is_refused_with_the_knobs():
    too_big = preflight(
        "--",
        "--accelerator_type=v5e",
        "--topology=2x2",
        "base.yml",
        "model_name=llama3-8b",
        "per_device_batch_size=4",
        "max_target_length=4096",
        "ici_fsdp_parallelism=4",
        "run_name=big",
        "dataset_type=synthetic",
    )
    assert too_big.returncode == 2, too_big.stdout + too_big.stderr
    assert "DOES NOT FIT" in too_big.stdout
    assert re.search(
        r"needs at least \d+\.\d GiB per chip but a v5litepod-4 chip has 16 GiB", too_big.stderr
    )
    for knob in ("per_device_batch_size", "remat_policy=full", "ici_fsdp_parallelism"):
        assert knob in too_big.stderr


# A model small enough to compile in seconds; the same code path as the tutorial job's advice
# (benchmarks/preflight_timing.py runs that one: minutes per candidate).
ADVICE_JOB = [
    "--accelerator_type=v6e",
    "--topology=4x4",
    "tiny-llama.yml",
    "run_name=advice",
    "per_device_batch_size=2",
    "base_num_kv_heads=4",
    "base_emb_dim=256",
    "base_mlp_dim=1024",
    "max_target_length=512",
]


def _launched_with(cache_dir: Path) -> list[psutil.Process]:
    """Every process of a launcher run given `cache_dir` (the launcher and its compiles): the
    environment they inherit marks them as this test's."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if "launcher" in " ".join(proc.info["cmdline"] or []) and proc.environ().get(
                "LAUNCHER_CACHE_DIR"
            ) == str(cache_dir):
                found.append(proc)
    return found


def _compiles(procs: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in procs if "launcher.preflight.aot_probe" in " ".join(p.cmdline())]


def _left_after(procs: list[psutil.Process], seconds: float = 15) -> list[psutil.Process]:
    return psutil.wait_procs(procs, timeout=seconds)[1]


def test_a_killed_advice_run_leaves_no_compile_running(tmp_path):
    """`kill -9` of a preflight mid-advice: its compile, a child process that would otherwise run
    on for minutes without it (one per two cores: several on a larger machine), ends with it."""
    env = {**os.environ, "LAUNCHER_CACHE_DIR": str(tmp_path)}
    launcher = subprocess.Popen(
        ends_with_this_process(
            [sys.executable, "-m", "launcher", "preflight", "--advise", "--", *ADVICE_JOB]
        ),
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    compiles: list[psutil.Process] = []
    while not compiles and time.monotonic() < deadline and launcher.poll() is None:
        time.sleep(0.5)
        compiles = _compiles(_launched_with(tmp_path))
    assert compiles, "the preflight started no compile"
    launcher.kill()
    launcher.wait()
    assert not _left_after(compiles), "compiles left running after the preflight was killed"


CUT_SHORT = """
import pytest
from harness.local_ray import tpu_launcher

@pytest.mark.timeout({limit}, method="{method}")
def test_advice_cut_short():
    tpu_launcher("preflight", "--advise", "--", *{job!r})
"""


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_a_timed_out_test_leaves_no_process_of_ours(tmp_path, method):
    """A test that runs the launcher (as these tests do, through harness.local_ray) hits
    pytest-timeout's limit mid-advice: by signal (the test fails, pytest goes on) or by thread
    (pytest exits at once, as under `kill -9`). Neither the launcher nor a compile is left."""
    test = tmp_path / "test_cut_short.py"
    test.write_text(CUT_SHORT.format(limit=45, method=method, job=ADVICE_JOB))
    cache = tmp_path / "cache"
    env = {**os.environ, "LAUNCHER_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    log = tmp_path / "pytest.log"
    with log.open("w") as out:  # a file, not a pipe: a thread dump must not block on it
        pytest_run = subprocess.Popen(
            ends_with_this_process(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)]
            ),
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        seen: list[psutil.Process] = []
        while pytest_run.poll() is None:
            seen = seen or _compiles(_launched_with(cache))
            time.sleep(0.5)
    output = log.read_text()
    assert "Timeout" in output and pytest_run.returncode != 0, output
    assert seen, f"no compile was running when the limit hit: nothing was shown\n{output}"
    left = _left_after(_launched_with(cache))
    assert not left, f"left running after the timed-out test: {[p.cmdline() for p in left]}"


def test_parallelism_is_checked_before_compiling():
    bad = preflight(
        "--values",
        "values/v6e-16.yaml",
        "--",
        "base.yml",
        "run_name=r",
        "ici_fsdp_parallelism=8",
        "ici_tensor_parallelism=4",
    )
    assert bad.returncode == 2 and "does not match the 16 devices per slice" in bad.stderr


ROW = re.compile(
    r"^  (?P<name>.+?)\s+(?P<global>[\d.]+)\s+~?(?P<gib>[\d.]+) GiB\s+(?P<fits>yes|no|est\.)"
    r"\s+(?P<step>[\d.]+)(?P<unit>m?s)\s+(?P<tokens>[\d,]+)\s+(?P<mfu>\d+)%$",
    re.M,
)


# A limit for hangs, not speed: about ten compiles, each minutes on a busy 2-core machine cold.
@pytest.mark.timeout(1800)
def test_sharding_advice_recommends_the_fastest_fitting_candidate_with_paste_ready_args():
    job = ADVICE_JOB
    # --max-batch 8: the same search with smaller, faster final compiles than up to batch 64.
    out = preflight("--advise", "--max-batch", "8", "--", *job)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout[out.stdout.index("sharding advice for") :]
    assert "PREDICTED" in text and "not a measurement" in text
    rows = [m.groupdict() for m in ROW.finditer(text)]
    given = rows[0]
    assert given["name"].startswith("the job as given: fsdp=16, full, batch 2"), text
    assert given["global"] == "32"  # 2 sequences x 16 chips
    compiled = [r for r in rows[1:] if r["fits"] != "est."]
    splits = {r["name"].split(",")[0] for r in compiled}
    assert {"fsdp=16", "data=4 x fsdp=4", "fsdp=4 x tensor=4"} <= splits, text
    for r in rows:  # tokens/s per chip is the batch's tokens over the predicted step
        batch = float(r["global"]) / 16
        step = float(r["step"]) / (1000 if r["unit"] == "ms" else 1)
        assert float(r["tokens"].replace(",", "")) == pytest.approx(batch * 512 / step, rel=0.01), r
    fitting = [r for r in compiled if r["fits"] == "yes"]
    best = max(fitting, key=lambda r: float(r["tokens"].replace(",", "")))
    assert best["name"].endswith("<- best"), text
    # A recommendation at a larger global batch says so (gradient accumulation keeps it only
    # where the batch per chip shrinks); at the job's own, nothing changes.
    if float(best["global"]) > 32:
        assert "global batch CHANGES" in text, text
    elif float(best["global"]) == 32:
        assert "global batch" not in text, text
    assert max(float(r["global"]) for r in rows) <= 8 * 16, text  # --max-batch 8, 16 chips

    # The pasted arguments are a job the launcher takes, with the recommendation in it.
    pasted = text.split(PASTE_HERE + "\n    ", 1)[1].splitlines()[0]
    job = parse_job_args(shlex.split(pasted))
    options, maxtext = job.options, list(job.maxtext_argv)
    assert options.accelerator_type == "v6e" and options.topology == "4x4"
    assert "--xla_tpu_enable_async_collective_fusion=true" in options.libtpu_init_args
    recommended = best["name"].removesuffix(" <- best").split(", ")
    assert f"remat_policy={recommended[1]}" in maxtext or recommended[1] == "full"
    assert f"per_device_batch_size={recommended[2].removeprefix('batch ')}" in maxtext
    again = preflight("--", *shlex.split(pasted))
    assert again.returncode == 0 and "verdict: fits" in again.stdout, again.stdout + again.stderr


# A dense family other than Llama's, and a MoE one with sinks, biases and a window (the
# tutorial's job is Llama's).
@pytest.mark.parametrize("family", ["qwen3", "gpt-oss"])
def test_a_job_from_an_import_compiles_the_imports_shape_where_its_record_is_seen(tmp_path, family):
    from launcher.core.job.run_dir import OUTPUT_DIR_ENV
    from launcher.core.job.run_requests import ImportRequest
    from launcher.runtime.models.hf_import import import_model
    from tests.support.tiny_models import parameter_count, tiny_model

    bucket, source = tmp_path / "bucket", tmp_path / "hf"
    tiny_model(family, source)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(OUTPUT_DIR_ENV, str(bucket))
        import_model(ImportRequest("tiny", str(source)), True)
    job = ("--", "--from=tiny", "base.yml", "run_name=r", "max_target_length=128")
    seen = preflight("--values", "values/v6e-16.yaml", "--data-dir", str(bucket), *job)
    assert seen.returncode == 0, seen.stdout + seen.stderr
    assert f"preflight: starts from import tiny: {parameter_count(source):,} parameters" in (
        seen.stdout
    )
    # The import's parameters, not base.yml's own model (about a billion).
    assert _gib(seen.stdout, "parameters + optimizer state") < 0.01, seen.stdout
    unseen = preflight("--values", "values/v6e-16.yaml", *job)
    assert unseen.returncode == 0, unseen.stdout + unseen.stderr
    assert "not compiled (give preflight --data-dir" in unseen.stdout
    assert "per-chip memory" not in unseen.stdout


def test_submit_plans_the_job_once_and_preflight_checks_that_plan(monkeypatch):
    """One plan per process: the plan `submit` makes for the values file's slice is the one
    preflight checks, not a second. (The compile, which this test does not need, is replaced
    by a stop: the plans counted are those made before it.)"""
    from launcher import cli
    from launcher.client.jobs import submit as ray_jobs
    from launcher.core.job import plan as job_plan
    from launcher.preflight import command

    original, plans = job_plan.plan_job, []

    def counted(*args, **kwargs):
        plans.append(kwargs.get("target"))
        return original(*args, **kwargs)

    for module in (job_plan, ray_jobs, command):
        monkeypatch.setattr(module, "plan_job", counted)

    class CompileReached(Exception):
        pass

    def stop(*args, **kwargs):
        raise CompileReached

    monkeypatch.setattr(command, "compile_report", stop)
    with pytest.raises(CompileReached):
        cli.main(["submit", "--values", "values/v6e-16.yaml", "--", *TUTORIAL_JOB])
    assert [str(target.shape.name) for target in plans] == ["v6e-16"]
