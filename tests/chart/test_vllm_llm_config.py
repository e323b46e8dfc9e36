"""The chart's RayService, read by Ray Serve LLM's own classes (the pinned Ray): its LLMConfig
validates, and the placement Ray derives for it is the slice the worker group holds, one bundle
per host. `ray.serve.llm` itself imports vLLM, which does not install here (docs/serving.md):
its config classes are imported from where `ray.serve.llm` re-exports them."""

from __future__ import annotations

import pytest
import yaml

from harness.helm import render
from launcher.core.tpu.table import tpu_type

pytestmark = pytest.mark.chart

TPU_SLICES = ["v6e-16", "v5p-16", "tpu7x-16"]


def rayservice(tpu: str) -> dict:
    docs = render(
        None,
        *("--set", "serving.engine=vllm", "--set", "ray.enabled=false"),
        *("--set", "vllm.model=/data/models/m", "--set", "vllm.apiKey.secretName=k"),
        *("--set", f"vllm.tpu.type={tpu}", "--set", "vllm.replicas=2"),
    )
    (service,) = [d for d in docs if d["kind"] == "RayService"]
    return service


def llm_config(service: dict) -> dict:
    serve = yaml.safe_load(service["spec"]["serveConfigV2"])
    (app,) = serve["applications"]
    assert app["import_path"] == "ray.serve.llm:build_openai_app"
    (config,) = app["args"]["llm_configs"]
    return config


@pytest.mark.parametrize("tpu", TPU_SLICES)
def test_rays_llm_config_takes_the_rendered_config(tpu):
    from ray.llm._internal.serve.core.configs.accelerators import TPUConfig
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    shape = tpu_type(tpu)
    config = LLMConfig.model_validate(llm_config(rayservice(tpu)))
    assert config.accelerator_type == shape.generation.ray_accelerator_type
    assert config.accelerator_config == TPUConfig(kind="tpu", topology=shape.topology)
    assert config.engine_kwargs["tensor_parallel_size"] == shape.devices
    assert config.deployment_config["num_replicas"] == 2
    assert config.model_loading_config.model_source == "/data/models/m"


@pytest.mark.parametrize("tpu", TPU_SLICES)
def test_one_bundle_per_host_of_the_slice_the_worker_group_holds(tpu):
    from ray._private.accelerators.tpu import get_chips_per_host
    from ray.llm._internal.serve.core.configs.accelerators import TPUAccelerator, TPUConfig
    from ray.util.tpu import get_tpu_version_from_type

    shape = tpu_type(tpu)
    service = rayservice(tpu)
    config = llm_config(service)
    (group,) = service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    (worker,) = group["template"]["spec"]["containers"]
    bundles = config["placement_group_config"]["bundles"]
    # The worker group: one slice per replica, its hosts, their chips.
    assert (group["replicas"], group["numOfHosts"]) == (2, shape.hosts)
    assert int(worker["resources"]["limits"]["google.com/tpu"]) == shape.chips_per_host
    assert len(bundles) == shape.hosts
    assert all(b["TPU"] == shape.chips_per_host for b in bundles)
    # Ray's own reading of the slice: chips per host of the topology, and the bundles it
    # derives for the slice's chips (its TPU resource counts chips).
    version = get_tpu_version_from_type(config["accelerator_type"])
    assert get_chips_per_host(shape.topology, version) == shape.chips_per_host
    accelerator = TPUAccelerator(TPUConfig(topology=shape.topology))
    derived = accelerator.default_bundles(
        num_devices=shape.chips, accelerator_type_str=config["accelerator_type"]
    )
    assert derived == bundles
    # From tensor_parallel_size (the devices) Ray derives the same where a chip is one device;
    # on tpu7x (two per chip) it would ask for twice the hosts: why the chart writes them out.
    from_tp = accelerator.default_bundles(
        num_devices=config["engine_kwargs"]["tensor_parallel_size"],
        accelerator_type_str=config["accelerator_type"],
    )
    assert (from_tp == bundles) == (shape.generation.devices_per_chip == 1)
