"""A multi-host vLLM release (a RayService: Ray Serve on a slice's hosts) in real pods on the
node, installed as a user does (`tpu-launcher install --values v6e-16-vllm`, the slice made a
v5p-16: a head and two hosts), with the release's NetworkPolicies enforced.

What cannot run here is STAND-IN, each named: vLLM's engine needs a TPU, so the pods run a
stand-in for vLLM's image (the stand-in Ray base with Ray Serve: ci/node/vllm-standin), and the
rendered Ray Serve LLM application is replaced, in the RayService's own serve config, by a
stand-in app that answers OpenAI's API with vLLM's API-key rule (`standin_vllm`); the node is
labelled as a v5p-16 pool's and advertises `google.com/tpu` (an extended resource no device
plugin backs). What is real: KubeRay's RayService controller making the Ray cluster and
deploying the app through the head's dashboard with the token KubeRay made (the RayService's
`authOptions`), Ray's hosts joining the head through the policies, the key reaching the replica
from the chart's Secret reference, the release's Service and its policy, and helm test's check.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterator

import pytest
import yaml

from harness.node import NodeCluster, build_vllm_standin

pytestmark = pytest.mark.node

# The preset's v6e-16 (four hosts) made a v5p-16 (two hosts of four chips): a multi-host slice
# on what this machine holds. Sized down; the image is the stand-in's.
SLICE = "v5p-16"
CHIPS = 8
SMALL = [
    *("--set", f"vllm.tpu.type={SLICE}"),
    *("--set", "vllm.rayService.head.resources.requests.cpu=250m"),
    *("--set", "vllm.rayService.head.resources.requests.memory=1Gi"),
    *("--set", "vllm.rayService.head.resources.limits.memory=2Gi"),
    *("--set", "vllm.resources.requests.cpu=250m"),
    *("--set", "vllm.resources.requests.memory=1Gi"),
    *("--set", "vllm.resources.limits.memory=3Gi"),
]


def _image_sets(name: str) -> list[str]:
    registry, rest = name.split("/", 1)
    repository, tag = rest.rsplit(":", 1)
    return [
        *("--set", f"vllm.image.registry={registry}"),
        *("--set", f"vllm.image.repository={repository}"),
        *("--set", f"vllm.image.tag={tag}"),
    ]


def _standin_app(serve_config: str) -> str:
    """The rendered serve config with its application's code replaced by the stand-in's: the
    same name, route and HTTP options, the model's name as the rendered LLMConfig gives it."""
    config = yaml.safe_load(serve_config)
    (app,) = config["applications"]
    assert app["import_path"] == "ray.serve.llm:build_openai_app", app  # what it stands in for
    model = app["args"]["llm_configs"][0]["model_loading_config"]["model_id"]
    config["applications"] = [
        {
            "name": app["name"],
            "route_prefix": app["route_prefix"],
            "import_path": "standin_vllm:build",
            "args": {"model": model},
        }
    ]
    return yaml.safe_dump(config)


@pytest.fixture(scope="module")
def tpu_labelled_node(node_cluster: NodeCluster) -> Iterator[str]:
    """The node as a v5p-16 pool's host would be labelled, advertising its chips (STAND-IN: an
    extended resource no device plugin backs); put back as it was after."""
    node = node_cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
    capacity = [{"op": "add", "path": "/status/capacity/google.com~1tpu", "value": str(CHIPS)}]
    node_cluster.kubectl(
        "patch", "node", node, "--subresource=status", "--type=json", "-p", json.dumps(capacity)
    )
    yield node
    remove = [{"op": "remove", "path": "/status/capacity/google.com~1tpu"}]
    node_cluster.kubectl(
        "patch",
        "node",
        node,
        "--subresource=status",
        "--type=json",
        "-p",
        json.dumps(remove),
        check=False,
    )


@pytest.fixture(scope="module")
def served(
    node_cluster: NodeCluster,
    launcher_image: str,
    tpu_labelled_node: str,
    user_env,
    tmp_path_factory,
) -> Iterator[dict]:
    namespace = f"serve-{uuid.uuid4().hex[:6]}"
    clients = f"clients-{uuid.uuid4().hex[:6]}"
    for ns in (namespace, clients):
        node_cluster.namespace(ns)
    key = secrets.token_hex(16)
    node_cluster.kubectl(
        "-n",
        namespace,
        "create",
        "secret",
        "generic",
        "vllm-api-key",
        f"--from-literal=api-key={key}",
    )
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": clients}}}
    team_values = tmp_path_factory.mktemp("values") / "clients.yaml"
    team_values.write_text(json.dumps({"networkPolicy": {"clients": [peer]}}))
    install = node_cluster.install(
        user_env,
        namespace,
        f"node-{uuid.uuid4().hex[:8]}",
        *SMALL,
        *_image_sets(build_vllm_standin()),
        *("--set", "vllm.model=/data/models/standin"),
        # A team's values beside the preset: who may call the model.
        *("--values", str(team_values)),
        values="v6e-16-vllm",
    )
    assert install.returncode == 0, install.stdout + install.stderr
    (service,) = json.loads(
        node_cluster.kubectl("-n", namespace, "get", "rayservices", "-o", "json")
    )["items"]
    name = service["metadata"]["name"]
    # The slice's hosts are scheduled only on a node with the pool's labels.
    selector = service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"][
        "nodeSelector"
    ]
    node_cluster.kubectl(
        "label",
        "node",
        tpu_labelled_node,
        "--overwrite",
        *(f"{k}={v}" for k, v in selector.items()),
    )
    patch = {"spec": {"serveConfigV2": _standin_app(service["spec"]["serveConfigV2"])}}
    node_cluster.kubectl(
        "-n", namespace, "patch", "rayservice", name, "--type=merge", "-p", json.dumps(patch)
    )
    node_cluster.wait(
        "KubeRay to deploy the Serve app on the slice's hosts",
        lambda: _app_status(node_cluster, namespace, name) == "RUNNING",
        timeout=600,
        explain=lambda: (
            json.dumps(
                (node_cluster.get("rayservice", name, namespace) or {}).get("status"), indent=1
            )
            + node_cluster.describe(namespace)
        ),
    )
    yield {"namespace": namespace, "clients": clients, "name": name, "key": key}
    node_cluster.uninstall(user_env, namespace)
    node_cluster.kubectl(
        "label", "node", tpu_labelled_node, *(f"{k}-" for k in selector), check=False
    )
    node_cluster.kubectl("delete", "namespace", clients, "--wait=false", check=False)


def _app_status(cluster: NodeCluster, namespace: str, name: str) -> str | None:
    service = cluster.get("rayservice", name, namespace) or {}
    apps = service.get("status", {}).get("activeServiceStatus", {}).get("applicationStatuses", {})
    return next(iter(apps.values()), {}).get("status")


def test_helm_test_gets_an_answer_from_a_slice_host_with_the_key_and_401_without(
    served, node_cluster: NodeCluster, user_env
):
    """helm test's check, through the release's Service and policy: without the key 401, with
    it the model listed and a completion, answered by the replica on one of the slice's hosts."""
    proc = node_cluster.helm_test(user_env, served["namespace"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "refuses a request without the API key" in proc.stdout, proc.stdout
    assert "-tpu-worker-" in proc.stdout, proc.stdout  # the replica's host: a worker pod


def test_a_named_client_is_served_and_an_outsider_is_not(served, node_cluster: NodeCluster):
    """The release's Service from the namespace `networkPolicy.clients` names: 401 without the
    key, 200 with it; from any other namespace the connection is not made (the policy)."""
    ns, clients = served["namespace"], served["clients"]
    svc = node_cluster.get("service", f"{served['name']}", ns)
    address = f"{svc['spec']['clusterIP']}:{svc['spec']['ports'][0]['port']}"
    bearer = f"Authorization: Bearer {served['key']}"
    assert node_cluster.http_status(clients, "no-key", address, "/v1/models")[0] == (
        "refused-by-server"
    )
    seen, said = node_cluster.http_status(clients, "with-key", address, "/v1/models", bearer)
    assert seen == "open", said
    outsider = f"out-{uuid.uuid4().hex[:6]}"
    node_cluster.namespace(outsider)
    try:
        seen, said = node_cluster.http_status(outsider, "outsider", address, "/v1/models", bearer)
        assert seen == "no-answer", said
    finally:
        node_cluster.kubectl("delete", "namespace", outsider, "--wait=false", check=False)


def test_the_rayservice_dashboard_asks_for_rays_token_with_the_policies_out(
    served, node_cluster: NodeCluster
):
    """The serving cluster's dashboard (where KubeRay put the app, with its token): refused to
    a named client by the policy (clients reach the serving port only); with the policies out
    the connection is made and Ray's token refuses it (401): `authOptions` on the RayService."""
    ns = served["namespace"]
    head = json.loads(
        node_cluster.kubectl("-n", ns, "get", "pods", "-l", "ray.io/node-type=head", "-o", "json")
    )["items"][0]
    dashboard = f"{head['status']['podIP']}:8265"
    seen, said = node_cluster.http_status(
        served["clients"], "dash", dashboard, "/api/serve/applications/"
    )
    assert seen == "no-answer", said
    with node_cluster.without_policies(ns):
        seen, said = node_cluster.once_policies_are_out(
            served["clients"], "dash-open", dashboard, "/api/serve/applications/"
        )
        assert seen == "refused-by-server", said
