"""A job's data checked before any host starts or anything compiles (launcher.core.data.checks,
through plan_job as the entrypoint and preflight call it): each fault refused with its key and
the fix, in seconds; and `tpu-launcher preflight --data-dir` exiting 2 on one before compiling."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.paths import REPO
from launcher.client.data.prepare import PrepareRequest, prepare
from launcher.core.errors import UsageError
from launcher.core.job.plan import parse_job_args, plan_job

pytestmark = pytest.mark.unit
SLICE = "--tpu=v5p-16"  # 2 hosts x 4 devices, as the local cluster simulates: global batch 8


@pytest.fixture(scope="module")
def bucket(tmp_path_factory) -> Path:
    """The shipped corpus prepared twice: with an eval split (tiny) and without (noeval)."""
    root = tmp_path_factory.mktemp("bucket")
    corpus = REPO / "launcher" / "corpus" / "tiny"
    prepare(PrepareRequest(corpus, "tiny", root, progress=False))
    prepare(PrepareRequest(corpus, "noeval", root, eval_fraction=0.0, progress=False))
    return root


def _plan(bucket: Path, *args: str):
    job = parse_job_args([SLICE, *args])
    options, maxtext_argv = job.options, list(job.maxtext_argv)
    return plan_job(options, maxtext_argv, data_root=str(bucket))


def _refused(bucket: Path, *args: str) -> UsageError:
    with pytest.raises(UsageError) as err:
        _plan(bucket, *args)
    return err.value


def test_data_names_the_prepared_dataset_and_the_plan_its_epochs(bucket):
    plan = _plan(bucket, "--data=tiny", "tiny-llama.yml", "run_name=r", "steps=100")
    where = f"{bucket}/datasets/tiny"
    assert plan.args.get("dataset_type") == "grain"
    assert plan.args.get("grain_train_files") == f"{where}/train-*.array_record"
    assert plan.args.get("grain_eval_files") == f"{where}/eval-*.array_record"
    assert plan.args.get("tokenizer_path") == f"{where}/tokenizer"
    m = plan.data.manifest
    lines = plan.data.describe()
    assert f"train {m.train.examples} examples, {m.train.tokens} tokens" in lines[0]
    # MaxText cuts each example to max_target_length (128) before packing; the corpus's longest
    # is shorter, so nothing is cut.
    assert m.train.longest < 128 and m.train.tokens_truncated_at_least(128) == m.train.tokens
    epochs = 100 * 8 * 128 / m.train.tokens
    assert lines[1].endswith(
        f"800 sequences x 128 tokens packed: up to {epochs:.3f} epochs (each example cut to "
        "max_target_length first)"
    )


def test_the_epochs_count_what_truncation_leaves():
    """Every example longer than the sequence: each packed row holds one cut example, so the
    job reads rows / examples of the split, whatever the examples' own length (a plan from the
    split's whole tokens said a quarter of that). With lengths across the cut, the count is a
    bound: never above what truncation leaves, exact where no bucket straddles the length."""
    import random

    from launcher.core.data.datasets import SplitStats, epoch_estimate, length_histogram

    long = [4096 + 7 * i for i in range(1000)]
    split = SplitStats(len(long), sum(long), lengths=length_histogram(long))
    estimate = epoch_estimate(
        split, steps=25, global_batch=10, max_target_length=1024, packing=True
    )
    assert estimate.epochs == pytest.approx(250 / 1000)
    assert epoch_estimate(SplitStats(len(long), sum(long)), 25, 10, 1024, True).epochs < 0.07
    rng = random.Random(0)
    for length in (1, 100, 128, 1000, 5000):
        docs = [rng.randint(0, 3000) for _ in range(500)]
        split = SplitStats(len(docs), sum(docs), lengths=length_histogram(docs))
        exact = sum(min(n, length) for n in docs)
        bound = split.tokens_truncated_at_least(length)
        assert bound is not None and bound <= exact
        if length in (1, 128):  # a power of two's edge: no bucket straddles it
            assert bound == exact


def test_a_dataset_counted_with_another_tokenizer_than_the_jobs_is_refused(bucket, tmp_path):
    """The job tokenizes with the model's tokenizer (here tokenizer_path=, as --from sets it);
    a dataset prepared with another would feed ids that mean other tokens to the model. The same
    tokenizer, copied elsewhere, is the same."""
    import shutil

    own = bucket / "datasets" / "tiny" / "tokenizer"
    same = tmp_path / "same"
    shutil.copytree(own, same)
    args = ["--data=tiny", "tiny-llama.yml", "run_name=r", "steps=10"]
    assert _plan(bucket, *args, f"tokenizer_path={same}").args.get("tokenizer_path") == str(same)
    other = tmp_path / "other"
    shutil.copytree(own, other)
    (other / "tokenizer.json").write_text((own / "tokenizer.json").read_text().replace("!", "?", 1))
    refused = _refused(bucket, *args, f"tokenizer_path={other}")
    assert refused.field == "--data" and "was tokenized with bytes" in str(refused)
    assert f"tokenizes with {other}" in str(refused) and "--tokenizer" in refused.fix


@pytest.mark.parametrize(
    ("args", "field", "says"),
    [
        (["--data=nope"], "--data", "no prepared dataset at"),
        (["--data=../x"], "--data", "is not a dataset name"),
        (["--data=tiny", "dataset_type=synthetic"], "dataset_type", "contradicts --data=tiny"),
        (["dataset_type=grain"], "grain_train_files", "names no training files"),
        (
            ["dataset_type=grain", "grain_train_files=/no/such/train-*.array_record"],
            "grain_train_files",
            "no file matches /no/such/train-*.array_record",
        ),
        (
            ["--data=tiny", "tokenizer_path=/no/such/tokenizer"],
            "tokenizer_path",
            "/no/such/tokenizer does not exist",
        ),
        (["--data=tiny", "vocab_size=128"], "vocab_size", "the tokenizer has 256 tokens"),
        # MaxText's own llama2 sentencepiece on the 256-token tiny model, loaded and counted.
        (
            ["--data=tiny", "tokenizer_path=tokenizer.llama2", "tokenizer_type=sentencepiece"],
            "vocab_size",
            "the tokenizer has 32000 tokens",
        ),
        (["--data=noeval", "eval_interval=5"], "eval_interval", "eval split is empty"),
        (["--data=tiny", "eval_interval=5", "eval_steps=50"], "eval_steps", "hosts run out"),
        (["--data=tiny", "steps=400"], "steps", "set num_epoch=2"),
        (["hf_access_token=hf_abc"], "hf_access_token", "Kubernetes Secret"),
        (["run_name=datasets"], "run_name", "where the bucket keeps prepared datasets"),
    ],
)
def test_each_data_fault_is_refused_with_its_key_and_fix_in_seconds(bucket, args, field, says):
    started = time.monotonic()
    flags = [a for a in args if a.startswith("--")]
    keys = [a for a in args if not a.startswith("--")]
    if not any(k.startswith("run_name=") for k in keys):
        keys.append("run_name=r")
    err = _refused(bucket, *flags, "tiny-llama.yml", *keys)
    assert err.field == field and says in str(err), str(err)
    assert err.fix
    assert time.monotonic() - started < 30  # no compile, no host: a tokenizer load at most


def test_more_epochs_than_one_are_allowed_when_asked_for(bucket):
    plan = _plan(bucket, "--data=tiny", "tiny-llama.yml", "run_name=r", "steps=400", "num_epoch=2")
    assert plan.data.train.surely_more_than > 1


def test_a_unreadable_data_file_is_named(bucket, tmp_path):
    (tmp_path / "train-0.array_record").mkdir()  # matches the glob, cannot be read
    err = _refused(
        bucket,
        "tiny-llama.yml",
        "run_name=r",
        "dataset_type=grain",
        f"grain_train_files={tmp_path}/train-*.array_record",
    )
    assert err.field == "grain_train_files" and "cannot be read" in str(err)


def test_preflight_refuses_a_data_fault_with_exit_2_before_any_compile(bucket):
    started = time.monotonic()
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "launcher", "preflight", "--data-dir", str(bucket), "--"),
            *(SLICE, "--data=tiny", "tiny-llama.yml", "run_name=r", "eval_interval=5"),
            "eval_steps=50",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "eval_steps" in proc.stderr and "fix: eval_steps=" in proc.stderr
    assert "compil" not in proc.stdout  # refused before the compile report
    print(f"\npreflight refused a data fault in {time.monotonic() - started:.1f}s")


def test_preflight_sees_the_hosts_data_paths_under_the_data_dir(bucket):
    """MaxText's own keys as the hosts name them (/data/...): read under --data-dir here."""
    job = parse_job_args(
        [
            *(SLICE, "tiny-llama.yml", "run_name=r", "dataset_type=grain"),
            "grain_train_files=/data/datasets/tiny/train-*.array_record",
            "tokenizer_path=/data/datasets/tiny/tokenizer",
            "tokenizer_type=huggingface",
        ]
    )
    options, argv = job.options, list(job.maxtext_argv)
    plan = plan_job(options, argv, data_root=str(bucket), hosts_data_root="/data")
    assert plan.args.get("grain_train_files").startswith("/data/")


def test_an_elastic_job_on_grain_data_needs_maxtexts_elastic_iterator():
    elastic = ["--tpu=v5p-8", "--num_slices=2", "--min_slices=1"]
    job = parse_job_args([*elastic, "--data=tiny", "tiny-llama.yml", "run_name=r"])
    options, argv = job.options, list(job.maxtext_argv)
    with pytest.raises(UsageError) as err:
        plan_job(options, argv)  # refused where the job is planned: no bucket needed
    assert err.value.field == "min_slices" and "grain_use_elastic_iterator=true" in str(err.value)
    grain = ["dataset_type=grain", "grain_use_elastic_iterator=true"]
    job = parse_job_args([*elastic, "tiny-llama.yml", "run_name=r", *grain])
    options, argv = job.options, list(job.maxtext_argv)
    with pytest.raises(UsageError, match="add packing=false"):
        plan_job(options, argv)
    plan_job(options, [*argv, "packing=false"])
