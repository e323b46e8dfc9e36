"""`tpu-launcher serve-fit`: will a model serve on a slice (or which slice will it serve on)?
And `install`'s check of a vLLM release: the model's config.json read from the release's bucket,
its weights and KV cache against the slice, before any TPU pod is created (core/serving_fit)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from launcher.client.jobs.release_data import bucket_of_pod
from launcher.client.serve.status import COMPONENT, SERVER
from launcher.core import serving_fit
from launcher.core.errors import UsageError
from launcher.core.release_facts import BucketMount
from launcher.core.tpu.slices import from_pod_spec, worker_group_slices
from launcher.core.tpu.table import GENERATIONS, SliceShape, tpu_type


@dataclass(frozen=True)
class Server:
    """What a release's vLLM server runs: the model (a path on the bucket mount), its slice,
    the engine's limits, and the bucket behind the mount."""

    model: str
    shape: SliceShape
    max_model_len: int
    max_num_seqs: int | None
    utilization: float
    where: BucketMount | None  # the bucket behind the mount

    @property
    def config_url(self) -> str | None:
        """gs://BUCKET/<model>/config.json, where the pods see <mount>/<model>."""
        if self.where is None:
            return None
        mount = self.where.mount.rstrip("/")
        if not self.model.startswith(mount):
            return None
        inside = self.model[len(mount) :].strip("/")
        return f"gs://{self.where.bucket}/{inside}/config.json"


def _flags(args: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)


def _from_args(args: list[str], pod: dict[str, Any], shape: SliceShape) -> Server:
    """A `vllm serve MODEL --flag=value ...` command line (the Deployment's, the leader's)."""
    flags = _flags(args)
    where = bucket_of_pod(pod)
    positional = [a for a in args if not a.startswith("-")]
    return Server(
        model=positional[0],
        shape=shape,
        max_model_len=int(flags.get("max-model-len", 4096)),
        max_num_seqs=int(flags["max-num-seqs"]) if "max-num-seqs" in flags else None,
        utilization=float(flags.get("gpu-memory-utilization", serving_fit.DEFAULT_UTILIZATION)),
        where=where,
    )


def server_of(docs: list[dict[str, Any]]) -> Server | None:
    """The vLLM server a rendered release runs (Deployment, RayService or LeaderWorkerSet)."""
    for doc in docs:
        kind, spec = doc.get("kind"), doc.get("spec", {})
        if doc.get("metadata", {}).get("labels", {}).get(COMPONENT) != SERVER:
            continue
        if kind == "Deployment":
            pod = spec["template"]["spec"]
            found = from_pod_spec(pod, 1)
            if found:
                return _from_args(pod["containers"][0].get("args", []), pod, found.shape)
        elif kind == "LeaderWorkerSet":
            pod = spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
            found = from_pod_spec(pod, 1)
            if found:
                return _from_args(pod["containers"][0].get("args", []), pod, found.shape)
        elif kind == "RayService":
            groups = worker_group_slices(spec["rayClusterConfig"])
            if not groups:
                continue
            slices, pod = groups[0]
            (llm,) = yaml.safe_load(spec["serveConfigV2"])["applications"][0]["args"]["llm_configs"]
            engine = llm.get("engine_kwargs", {})
            where = bucket_of_pod(pod)
            return Server(
                model=llm["model_loading_config"]["model_source"],
                shape=slices.shape,
                max_model_len=int(engine.get("max_model_len", 4096)),
                max_num_seqs=engine.get("max_num_seqs"),
                utilization=float(
                    engine.get("gpu_memory_utilization", serving_fit.DEFAULT_UTILIZATION)
                ),
                where=where,
            )
    return None


def _read_gs(url: str) -> str | None:
    """The text at a gs:// URL, or None (said) where this machine cannot read it."""
    try:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc

        from launcher.core.gcs import storage_client
    except ImportError:
        from launcher.core.package_version import pip_install

        print(f"note: the model is not sized here (reading {url} needs {pip_install('gcs')})")
        return None
    bucket, _, name = url.removeprefix("gs://").partition("/")
    try:
        return storage_client().bucket(bucket).blob(name).download_as_text()
    except gexc.NotFound:
        raise UsageError(
            "vllm.model",
            f"the release's bucket holds no model there (no {url})",
            "export one (`tpu-launcher export --run RUN` prints the path) or copy a Hugging "
            "Face model directory there, then --set vllm.model=<its path on the mount>",
        ) from None
    except (gexc.GoogleAPIError, auth_exc.GoogleAuthError, OSError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"note: the model is not sized here (could not read {url}: {first})")
        return None


def check_release(docs: list[dict[str, Any]]) -> serving_fit.ServingFit | None:
    """`install` of a vLLM release: its model against its slice, refused (UsageError naming a
    slice that fits) before anything is installed; None where there is nothing to read."""
    server = server_of(docs)
    if server is None or (url := server.config_url) is None:
        return None
    text = _read_gs(url)
    if text is None:
        return None
    model, dtype = serving_fit.parse_config(text, url, Path(server.model).name)
    result = serving_fit.check(
        model,
        server.shape,
        dtype=dtype,
        max_model_len=server.max_model_len,
        max_num_seqs=server.max_num_seqs,
        utilization=server.utilization,
    )
    print(f"launcher: {model.name} fits {server.shape.name}: {result.lines()[-1]}", flush=True)
    return result


def _model(word: str) -> tuple[serving_fit.ModelSize, str]:
    if word.lower() in serving_fit.KNOWN_MODELS:
        return serving_fit.sized(serving_fit.KNOWN_MODELS[word.lower()], word.lower())
    if word.startswith("gs://"):
        text = _read_gs(word.rstrip("/") + ("" if word.endswith(".json") else "/config.json"))
        if text is None:
            raise UsageError(word, "could not be read here", "copy its config.json and name it")
        return serving_fit.parse_config(text, word, word.rstrip("/").rsplit("/", 1)[-1])
    if not Path(word).exists():
        raise UsageError(
            "MODEL",
            f"{word!r} is not a directory, a config.json, a gs:// path or a known model",
            f"name a Hugging Face model directory or one of {', '.join(serving_fit.KNOWN_MODELS)}",
        )
    return serving_fit.read_model(word)


def run_serve_fit(ns: argparse.Namespace) -> int:
    model, saved = _model(ns.model)
    options: dict[str, Any] = dict(
        dtype=ns.dtype or saved,
        kv_dtype=ns.kv_cache_dtype,
        max_model_len=ns.max_model_len,
        max_num_seqs=ns.max_num_seqs,
        utilization=ns.gpu_memory_utilization,
    )
    if ns.tpu:
        result = serving_fit.check(model, tpu_type(ns.tpu), **options)
    else:
        found = serving_fit.smallest_fit(model, ns.generation, **options)
        if found is None:
            largest = serving_fit.slices_of(ns.generation)[-1]
            serving_fit.check(model, largest, **options)  # raises, saying why
            return 1
        result = found
    for line in result.lines():
        print(line)
    served = "a RayService: Ray Serve LLM" if result.shape.multi_host else "a Deployment"
    print(
        f"fits: --set vllm.tpu.type={result.shape.name} --set vllm.maxModelLen="
        f"{result.max_model_len} (served by {served})"
    )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve-fit",
        help="will a model serve on a TPU slice with vLLM? (weights and KV cache per host)",
        description="The model's weights and one full-length sequence's KV cache against the "
        "slice's HBM per host (vLLM's own rule for starting), and how many sequences fit at "
        "once. Without --tpu: the smallest slice of --generation that serves it.",
    )
    p.add_argument(
        "model",
        metavar="MODEL",
        help="a Hugging Face model directory or its config.json (local or gs://), or "
        f"{', '.join(serving_fit.KNOWN_MODELS)}",
    )
    p.add_argument("--tpu", help="the slice, as Cloud TPU names it (v6e-16)")
    p.add_argument(
        "--generation",
        default="v6e",
        choices=sorted(GENERATIONS),
        help="without --tpu: the generation to pick the smallest slice of (default %(default)s)",
    )
    p.add_argument("--max-model-len", type=int, default=4096, help="vLLM's (default %(default)s)")
    p.add_argument("--max-num-seqs", type=int, help="sequences that must fit at once (default 1)")
    p.add_argument(
        "--dtype",
        choices=list(serving_fit.DTYPE_BYTES),
        help="the weights' dtype (default: the model's; float32 serves as bfloat16)",
    )
    p.add_argument(
        "--kv-cache-dtype",
        choices=list(serving_fit.DTYPE_BYTES),
        help="the KV cache's dtype (default: the weights', bfloat16 under 8-bit weights)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=serving_fit.DEFAULT_UTILIZATION,
        help="vLLM's share of each chip's HBM (default %(default)s)",
    )
    p.set_defaults(func=run_serve_fit)
