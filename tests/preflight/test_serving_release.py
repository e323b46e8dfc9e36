"""`install` of a vLLM release sizes its model before anything is installed: the model's
config.json read from the release's own bucket (the GCS emulator here, the bucket the rendered
server mounts) against the slice the release asks for, for each way vLLM runs: a Deployment, a
RayService, a LeaderWorkerSet."""

from __future__ import annotations

import json

import pytest

from harness.helm import render
from launcher.client.serve.fit import check_release, server_of
from launcher.core.errors import UsageError
from launcher.core.serving_fit import KNOWN_MODELS

pytestmark = pytest.mark.preflight


def vllm(tpu: str, controller: str = "", model: str = "/data/models/m", *sets: str) -> list[dict]:
    return render(
        None,
        *("--set", "serving.engine=vllm", "--set", "ray.enabled=false"),
        *("--set", "global.gcsfuse.bucketName=ckpt", "--set", "vllm.apiKey.secretName=k"),
        *("--set", f"vllm.model={model}", "--set", f"vllm.tpu.type={tpu}"),
        *("--set", f"vllm.controller={controller}", *sets),
    )


@pytest.fixture
def bucket(storage):
    ckpt = storage.bucket("ckpt")
    for name in ("llama3.1-70b", "llama3.1-405b"):
        ckpt.blob(f"models/{name}/config.json").upload_from_string(json.dumps(KNOWN_MODELS[name]))
    return ckpt


@pytest.mark.parametrize(("controller", "kind"), [("", "RayService"), ("lws", "LeaderWorkerSet")])
def test_each_server_names_its_model_slice_and_bucket(controller, kind):
    docs = vllm("v6e-16", controller, "/data/models/x", "--set", "vllm.maxModelLen=8192")
    assert kind in {d["kind"] for d in docs}
    server = server_of(docs)
    assert (server.model, server.shape.name, server.max_model_len) == (
        "/data/models/x", "v6e-16", 8192,
    )  # fmt: skip
    assert server.config_url == "gs://ckpt/models/x/config.json"


@pytest.mark.parametrize("controller", ["", "lws"])
def test_405b_on_v6e_16_is_refused_before_install_naming_the_slice(bucket, controller):
    with pytest.raises(UsageError) as err:
        check_release(vllm("v6e-16", controller, "/data/models/llama3.1-405b"))
    assert err.value.field == "llama3.1-405b on v6e-16"
    assert "--set vllm.tpu.type=v6e-32" in err.value.fix


def test_70b_fits_v6e_16_and_a_single_host_deployment_of_v6e_8(bucket, capsys):
    assert check_release(vllm("v6e-16", "", "/data/models/llama3.1-70b")).fits
    result = check_release(vllm("v6e-8", "", "/data/models/llama3.1-70b"))
    assert result.shape.hosts == 1 and result.tensor_parallel == 8
    assert "launcher: llama3.1-70b fits v6e-8" in capsys.readouterr().out


def test_engine_kwargs_count_max_num_seqs_the_server_must_hold(bucket):
    docs = vllm("v6e-16", "", "/data/models/llama3.1-70b", "--set", "vllm.maxModelLen=131072",
                "--set", "vllm.engineKwargs.max_num_seqs=64")  # fmt: skip
    with pytest.raises(UsageError) as err:
        check_release(docs)
    assert "KV cache of 64 131072-token sequence(s)" in err.value.problem


def test_a_model_the_bucket_does_not_hold_is_refused(bucket):
    with pytest.raises(UsageError) as err:
        check_release(vllm("v6e-16", "", "/data/models/nope"))
    assert "no gs://ckpt/models/nope/config.json" in err.value.problem
