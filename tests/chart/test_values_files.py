"""Each values file names its slice (`type: v6e-16`) and nothing the table derives; the chart
derives every name exactly as the launcher does; the chart's copy of the table is the
launcher's, regenerated, not edited by hand."""

from __future__ import annotations

import pytest
import yaml

from harness.helm import CHART, VALUES_FILES, by_kind, render
from launcher.core.job.run_requests import TORCH_ENTRYPOINT, TRAIN_ENTRYPOINT
from launcher.core.tpu.table import (
    GENERATIONS,
    GKE_ACCELERATOR_LABEL,
    GKE_TOPOLOGY_LABEL,
    slice_shape,
    tpu_type,
    tpu_type_names,
)
from launcher.core.values_file import tpu_blocks
from tests.chart.conftest import notes

pytestmark = pytest.mark.chart

# What the TPU table derives from a slice's name; a values file that states one is not shrunk.
DERIVED = ("generation", "gkeAccelerator", "machineType", "hostsPerSlice")


@pytest.mark.parametrize("path", VALUES_FILES, ids=lambda p: p.name)
def test_values_file_names_its_slice_and_nothing_derived(path):
    values = yaml.safe_load(path.read_text())
    for where, tpu in tpu_blocks(values).items():
        assert "type" in tpu, f"{path.name} {where} does not name its slice (type: v6e-16)"
        assert not [k for k in DERIVED if k in tpu], f"{path.name} {where} restates the table"
        tpu_type(tpu["type"], tpu.get("chipsPerHost"))  # a name the table knows


def test_cpu_values_file_keeps_several_hosts():
    values = yaml.safe_load((CHART.parents[1] / "values" / "cpu.yaml").read_text())
    assert values["ray"]["worker"]["tpu"]["enabled"] is False
    assert values["ray"]["worker"]["cpu"]["hosts"] > 1


def test_chart_defaults_are_a_valid_slice():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for tpu in (values["ray"]["worker"]["tpu"], values["saxml"]["modelServer"]["tpu"]):
        tpu_type(tpu["type"], tpu["chipsPerHost"])
        assert not [k for k in DERIVED if tpu[k]], "the chart's defaults restate the table"


def _worker_group(*sets: str) -> dict:
    (cluster,) = by_kind(render(None, *[a for s in sets for a in ("--set", s)]), "RayCluster")
    (group,) = cluster["spec"]["workerGroupSpecs"]
    return group


def _scheduling(group: dict) -> tuple:
    pod = group["template"]["spec"]
    (container,) = pod["containers"]
    return (
        group["numOfHosts"],
        pod["nodeSelector"],
        container["resources"]["limits"]["google.com/tpu"],
        container["resources"]["requests"]["google.com/tpu"],
    )


@pytest.mark.parametrize("name", sorted(tpu_type_names()))
def test_the_chart_derives_every_name_as_the_launcher_does(name):
    shape = tpu_type(name)
    assert _scheduling(_worker_group(f"ray.worker.tpu.type={name}")) == (
        shape.hosts,
        {
            GKE_ACCELERATOR_LABEL: shape.generation.gke_accelerator,
            GKE_TOPOLOGY_LABEL: shape.topology,
        },
        str(shape.chips_per_host),
        str(shape.chips_per_host),
    )


def test_an_ironwood_slice_renders_as_gke_builds_it():
    """GKE's "About Ironwood (TPU7x) in GKE": tpu7x-16 is topology 2x2x2 on two
    tpu7x-standard-4t VMs of 4 chips, nodes labelled gke-tpu-accelerator=tpu7x; Ray's own name
    for it (v7x-16) is the same slice."""
    expected = (2, {GKE_ACCELERATOR_LABEL: "tpu7x", GKE_TOPOLOGY_LABEL: "2x2x2"}, "4", "4")
    assert _scheduling(_worker_group("ray.worker.tpu.type=tpu7x-16")) == expected
    assert _scheduling(_worker_group("ray.worker.tpu.type=v7x-16")) == expected
    assert _scheduling(_worker_group("ray.worker.tpu.type=tpu7x-128"))[0] == 16


@pytest.mark.parametrize(
    "name", [slice_shape(g.name, g.topologies[-1]).name for g in GENERATIONS.values()]
)
def test_the_long_form_with_every_key_renders_what_the_name_does(name):
    """Every generation's derived keys, set to their true values, are taken (the schema once
    refused Ironwood's node label, tpu7x)."""
    shape = tpu_type(name)
    long_form = _worker_group(
        "ray.worker.tpu.type=",
        f"ray.worker.tpu.generation={shape.generation.name}",
        f"ray.worker.tpu.gkeAccelerator={shape.generation.gke_accelerator}",
        f"ray.worker.tpu.topology={shape.topology}",
        f"ray.worker.tpu.machineType={shape.machine_type}",
        f"ray.worker.tpu.chipsPerHost={shape.chips_per_host}",
        f"ray.worker.tpu.hostsPerSlice={shape.hosts}",
    )
    assert long_form == _worker_group(f"ray.worker.tpu.type={name}")


def test_chips_per_host_chooses_between_a_names_shapes():
    assert _scheduling(_worker_group("ray.worker.tpu.type=v6e-8"))[0] == 1
    assert _scheduling(_worker_group("ray.worker.tpu.type=v6e-8", "ray.worker.tpu.chipsPerHost=4"))[
        ::2
    ] == (2, "4")


@pytest.mark.parametrize("framework", ["jax", "torch"])
def test_the_job_command_notes_show_is_what_submit_sends(chart_with_notes, framework):
    """NOTES print a plain `ray job submit` line for users without the launcher installed: the
    entrypoint submit sends for the release's framework (the cluster's own door)."""
    entrypoint = {"jax": TRAIN_ENTRYPOINT, "torch": TORCH_ENTRYPOINT}[framework]
    text = notes(chart_with_notes, "v6e-16", f"--set=ray.framework={framework}")
    line = f"ray job submit --address http://127.0.0.1:8265 -- {' '.join(entrypoint)} <job args>"
    assert line in text, text
    # Ray 2.60 clients add the token header only in token mode (ray/_private/authentication/
    # http_token_authentication.py: get_auth_headers_if_auth_enabled).
    assert "export RAY_AUTH_MODE=token" in text


@pytest.mark.parametrize("path", VALUES_FILES, ids=lambda p: p.name)
def test_every_values_file_renders_a_network_policy_for_each_part_that_runs_pods(path):
    """Closed by default whatever the topology: every pod the release runs (helm test's too) is
    selected by one of its NetworkPolicies (the control plane's installs dry-run them)."""
    docs = render(path)
    policies = by_kind(docs, "NetworkPolicy")
    selectors = [p["spec"]["podSelector"]["matchLabels"] for p in policies]

    def selected(labels: dict) -> bool:
        return any(all(labels.get(k) == v for k, v in s.items()) for s in selectors)

    pods = []
    for doc in docs:
        if doc["kind"] == "RayCluster":
            spec = doc["spec"]
            pods += [spec["headGroupSpec"]["template"]]
            pods += [g["template"] for g in spec["workerGroupSpecs"]]
        elif doc["kind"] == "Deployment":
            pods.append(doc["spec"]["template"])
        elif doc["kind"] == "JobSet":
            pods += [rj["template"]["spec"]["template"] for rj in doc["spec"]["replicatedJobs"]]
        elif doc["kind"] == "Pod":
            pods.append(doc)
    assert pods and policies
    unselected = [
        p["metadata"].get("labels") for p in pods if not selected(p["metadata"]["labels"])
    ]
    assert not unselected, f"pods no NetworkPolicy selects: {unselected}"
