"""`tpu-launcher data prepare|show`: a team's corpus in the bucket, ready for `--data NAME`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from launcher.client.cluster_options import add_where_options
from launcher.client.workspace import DATA_STAGING, LOCAL_BUCKET
from launcher.core.data.byte_tokenizer import BYTES
from launcher.core.data.datasets import (
    DATASETS_SUBDIR,
    TEXT_FEATURE,
    check_dataset_name,
    describe_manifest,
    read_manifest,
)
from launcher.core.data.shards import DEFAULT_SHARD_MB, PrepareRequest
from launcher.core.data.tokenizers import TOKENIZER_TYPES
from launcher.core.errors import UsageError
from launcher.core.gcs import has_storage_client
from launcher.core.job.trainers import SFT_FIELDS
from launcher.corpus import shipped


def default_output_dir() -> Path:
    """This directory's local bucket: the one its local cluster mounts (`up` started from here),
    else the one `tpu-launcher up` makes here; never another directory's cluster's."""
    from launcher.client.local.cluster import running_bucket_of_here

    return running_bucket_of_here() or Path(LOCAL_BUCKET)


def _positive_mb(text: str) -> float:
    """--shard-mb: a size above zero (argparse says the flag and the value when it is not)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of MB") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} MB: a shard needs a size above 0")
    return value


def _threshold(text: str) -> float:
    """--near-duplicates: a Jaccard similarity in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text}: a Jaccard similarity between 0 and 1, e.g. 0.8")
    return value


def _request(ns: argparse.Namespace, source: Path | str, output: Path | str) -> PrepareRequest:
    return PrepareRequest(
        source=source,
        name=ns.name,
        output_dir=output,
        tokenizer=ns.tokenizer,
        tokenizer_type=ns.tokenizer_type,
        eval_fraction=ns.eval_fraction,
        split_seed=ns.split_seed,
        fields=tuple(ns.fields.split(",")) if ns.fields else (ns.text_field,),
        shard_mb=ns.shard_mb,
        overwrite=ns.overwrite,
        progress=not ns.no_progress,
        near_duplicates=ns.near_duplicates,
    )


def run_prepare(ns: argparse.Namespace) -> int:
    check_dataset_name(ns.name)
    if not 0 <= ns.eval_fraction < 1:
        raise UsageError(
            "--eval-fraction", f"must be in [0, 1), got {ns.eval_fraction}", "e.g. 0.05"
        )
    if ns.address or ns.release:
        from launcher.client.data.on_cluster import prepare_on_cluster

        code = prepare_on_cluster(ns, lambda output: _request(ns, ns.source or "", output))
        if code == 0:
            _train_on_it(ns)
        return code
    if ns.parallelism or ns.on_tpu_hosts:
        raise UsageError(
            "--parallelism" if ns.parallelism else "--on-tpu-hosts",
            "is for a preparation on a cluster's hosts",
            "add --release NAME (or --address URL), or leave it out to prepare here",
        )
    if ns.source and ns.source.startswith("gs://"):
        raise UsageError(
            "SOURCE",
            f"{ns.source}: this machine prepares files it has; a corpus in the bucket is read "
            "where it is by the cluster's hosts",
            f"add --release NAME (or --address URL): data prepare {ns.source} --release NAME",
        )
    from launcher.client.data.prepare import prepare

    url = ns.output_dir if ns.output_dir and ns.output_dir.startswith("gs://") else None
    if url:
        if not has_storage_client():  # said before the corpus is read, not after
            from launcher.core.package_version import pip_install

            raise UsageError(
                "--output-dir",
                f"{url} is uploaded with google-cloud-storage, which is not installed here",
                f"{pip_install('gcs')}, or prepare into the bucket's gcsfuse mount",
            )
        from launcher.client.data.upload import staging_dir

        output = staging_dir(url)
    else:
        output = Path(ns.output_dir) if ns.output_dir else default_output_dir()
    manifest = prepare(
        _request(ns, Path(ns.source) if ns.source else shipped(bool(ns.fields)), output)
    )
    where = f"{output}/{DATASETS_SUBDIR}/{ns.name}"
    if url:
        from launcher.client.data.upload import upload

        sent = upload(output, url, ns.name)
        where = f"{url.rstrip('/')}/{DATASETS_SUBDIR}/{ns.name}"
        print(f"data: {sent} file(s) sent to {where} (prepared in {output})", file=sys.stderr)
    print(describe_manifest(manifest, where))
    _train_on_it(ns)
    return 0


def _train_on_it(ns: argparse.Namespace) -> None:
    how = f"--trainer=sft --from=MODEL --data={ns.name}" if ns.fields else f"--data={ns.name}"
    print(f"train on it: tpu-launcher submit ... -- {how} <config.yml> key=value ...")


def run_show(ns: argparse.Namespace) -> int:
    check_dataset_name(ns.name, "NAME")
    output = Path(ns.output_dir) if ns.output_dir else default_output_dir()
    where = output / DATASETS_SUBDIR / ns.name
    print(describe_manifest(read_manifest(where, "data show"), where))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser(
        "data",
        help="prepare a corpus for MaxText's Grain pipeline in the bucket (jobs: --data NAME)",
        description=__doc__,
    )
    actions = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    what = (
        "text (.txt/.md: one document a file), JSONL (one a line) or Parquet (one a row) -> "
        "ArrayRecord shards, a train and an eval split and a manifest in "
        "<bucket>/datasets/NAME; resumes a run cut short, skips one already done"
    )
    p = actions.add_parser("prepare", help=what, description=what)
    p.add_argument(
        "source",
        nargs="?",
        help="a file or directory (default: the project's own tiny corpus, for the local road; "
        "with --fields, its tiny instruction set)",
    )
    p.add_argument("--name", required=True, help="the dataset's name: jobs say --data NAME")
    p.add_argument(
        "--output-dir",
        help=f"the bucket: gs://BUCKET[/prefix] (prepared in {DATA_STAGING}, then "
        "uploaded, the manifest last), a directory where it is mounted, or (the default) this "
        f"directory's local bucket, {LOCAL_BUCKET}, which `tpu-launcher up` here mounts",
    )
    p.add_argument(
        "--tokenizer",
        default=BYTES,
        help="a sentencepiece .model or .tiktoken file, a Hugging Face tokenizer directory, or "
        "a name in MaxText's assets/tokenizers (tokenizer.llama2); 'bytes' (default): UTF-8 "
        "bytes, the demo model's 256-token vocabulary. Copied into the dataset.",
    )
    p.add_argument(
        "--tokenizer-type",
        choices=TOKENIZER_TYPES,
        help="MaxText's tokenizer_type (default: from the path)",
    )
    p.add_argument(
        "--eval-fraction",
        type=float,
        default=0.05,
        help="documents held out for eval loss (by a hash of their text; default 0.05)",
    )
    p.add_argument("--split-seed", type=int, default=0, help="changes which documents are held out")
    fields = p.add_mutually_exclusive_group()
    fields.add_argument(
        "--text-field", default=TEXT_FEATURE, help="the JSONL field or Parquet column"
    )
    fields.add_argument(
        "--fields",
        choices=SFT_FIELDS,
        metavar="PAIR",
        help=f"an instruction set for `--trainer=sft`: the fields of each example, one of "
        f"{' or '.join(SFT_FIELDS)}, kept apart for the chat template and the loss on the "
        "completion only",
    )
    p.add_argument(
        "--shard-mb",
        type=_positive_mb,
        default=DEFAULT_SHARD_MB,
        help=f"text per shard (default {DEFAULT_SHARD_MB} MB)",
    )
    p.add_argument(
        "--near-duplicates",
        type=_threshold,
        metavar="JACCARD",
        help="also drop near duplicates: documents whose word 5-grams' Jaccard similarity with "
        "an earlier one is about JACCARD or more (MinHash, 128 permutations, LSH bands), e.g. "
        "0.8; the manifest counts them",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a dataset of this name")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    cluster = p.add_argument_group(
        "on a cluster's hosts",
        "with --release or --address, a Ray job prepares it there with Ray Data: SOURCE and "
        "--output-dir are as the cluster's hosts see them (gs://BUCKET/prefix, or a path under "
        "the bucket's mount; the default output: the release's bucket mount)",
    )
    add_where_options(cluster)
    cluster.add_argument(
        "--parallelism",
        type=int,
        metavar="N",
        help="tasks at once (default: as many as the hosts' CPUs fit)",
    )
    cluster.add_argument(
        "--on-tpu-hosts",
        action="store_true",
        help="let the TPU slices' hosts work too (default: the head and CPU hosts only; use it "
        "while the slices are idle)",
    )
    p.set_defaults(func=run_prepare)

    what = "print a prepared dataset's manifest: examples, tokens, shards, tokenizer"
    p = actions.add_parser("show", help=what, description=what)
    p.add_argument("name", help="the dataset's name (what data prepare --name gave it)")
    p.add_argument(
        "--output-dir", help=f"the bucket's directory (default: this directory's {LOCAL_BUCKET})"
    )
    p.set_defaults(func=run_show)
