"""Render every values file with Helm 3 and Helm 4; both render the same objects. (`make verify`
lints each with both, and checks the generated files for drift.)"""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from harness.helm import CHART, VALUES_FILES, by_kind, render
from launcher.core.job.frameworks import FRAMEWORKS, NAMES
from launcher.core.release_facts import ReleaseFacts
from launcher.core.runtime_door import JOB_ENTRYPOINT

pytestmark = pytest.mark.chart


def _without_token(docs):
    return [{**d, "data": "<random>"} if d["kind"] == "Secret" else d for d in docs]


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda p: p.name)
def test_helm3_and_helm4_render_the_same_objects(values):
    assert _without_token(render(values, major=3)) == _without_token(render(values, major=4))


def test_every_object_carries_the_standard_labels():
    docs = render(None, "--set", "serving.engine=saxml")
    for doc in docs:
        labels = doc["metadata"]["labels"]
        for key in (
            "app.kubernetes.io/name",
            "app.kubernetes.io/instance",
            "app.kubernetes.io/component",
            "app.kubernetes.io/managed-by",
            "helm.sh/chart",
            "app.kubernetes.io/version",
        ):
            assert key in labels, f"{doc['kind']} {doc['metadata']['name']} lacks {key}"


def test_ray_pods_carry_the_label_the_tpu_webhook_selects():
    (cluster,) = [d for d in render(None) if d["kind"] == "RayCluster"]
    templates = [cluster["spec"]["headGroupSpec"]["template"]] + [
        g["template"] for g in cluster["spec"]["workerGroupSpecs"]
    ]
    for template in templates:
        assert template["metadata"]["labels"]["app.kubernetes.io/name"] == "kuberay"


def test_multislice_declares_megascale_for_the_webhook():
    (cluster,) = [
        d
        for d in render(CHART.parents[1] / "values" / "v6e-16-x2.yaml")
        if d["kind"] == "RayCluster"
    ]
    group = cluster["spec"]["workerGroupSpecs"][0]
    env = {e["name"]: e.get("value") for e in group["template"]["spec"]["containers"][0]["env"]}
    assert (group["replicas"], group["numOfHosts"], env["MEGASCALE_NUM_SLICES"]) == (2, 4, "2")


def _ray_cluster(*sets: str) -> dict:
    values = CHART.parents[1] / "values" / "v6e-16-x2.yaml"
    (cluster,) = [d for d in render(values, *sets) if d["kind"] == "RayCluster"]
    return cluster


def _facts(cluster: dict) -> ReleaseFacts:
    facts = ReleaseFacts.of_cluster_spec(cluster["spec"], "the render")
    assert facts is not None
    return facts


def test_min_slices_makes_the_worker_group_and_its_jobs_elastic():
    cluster = _ray_cluster("--set", "ray.worker.tpu.minSlices=1")
    group = cluster["spec"]["workerGroupSpecs"][0]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 1, 2)
    assert _facts(cluster).min_slices == 1  # the launcher reads it
    # Without it every slice is needed, always, and jobs are not told otherwise.
    fixed = _ray_cluster()
    group = fixed["spec"]["workerGroupSpecs"][0]
    assert (group["minReplicas"], group["maxReplicas"]) == (2, 2)
    assert _facts(fixed).min_slices is None


def test_security_defaults():
    """Closed by default: token auth with KubeRay's Secret, nothing reachable from outside the
    cluster, a NetworkPolicy per part, an identity per part, Saxml off the host network."""
    docs = render(None, "--set", "serving.engine=saxml")
    (cluster,) = [d for d in docs if d["kind"] == "RayCluster"]
    assert cluster["spec"]["authOptions"] == {"mode": "token"}
    assert cluster["spec"]["headGroupSpec"]["serviceType"] == "ClusterIP"
    assert {s["spec"]["type"] for s in by_kind(docs, "Service")} == {"ClusterIP"}
    assert not by_kind(docs, "Secret")
    policies = {p["metadata"]["name"] for p in by_kind(docs, "NetworkPolicy")}
    assert policies == {
        "tpu-ray",
        "tpu-saxml-admin",
        "tpu-saxml-model",
        "tpu-saxml-http",
        "tpu-tests",
    }
    accounts = {a["metadata"]["name"] for a in by_kind(docs, "ServiceAccount")}
    assert accounts == {"tpu-ray", "tpu-saxml", "tpu-ray-test"}  # the last: helm test's
    (jobset,) = by_kind(docs, "JobSet")
    assert (
        jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["hostNetwork"]
        is False
    )
    for doc in docs:
        for pod in _pod_specs(doc):
            for c in pod["containers"]:
                assert not c.get("securityContext", {}).get("privileged"), doc["kind"]


def _pod_specs(doc):
    spec = doc.get("spec", {})
    if doc["kind"] == "RayCluster":
        yield spec["headGroupSpec"]["template"]["spec"]
        for g in spec["workerGroupSpecs"]:
            yield g["template"]["spec"]
    elif doc["kind"] == "Deployment":
        yield spec["template"]["spec"]
    elif doc["kind"] == "JobSet":
        for rj in spec["replicatedJobs"]:
            yield rj["template"]["spec"]["template"]["spec"]
    elif doc["kind"] == "Pod":
        yield spec


def test_external_load_balancer_only_when_asked_with_source_ranges():
    docs = render(
        None,
        "--set",
        "serving.engine=saxml",
        "--set",
        "saxml.http.service.type=LoadBalancer",
        "--set",
        "saxml.http.service.internal=false",
        "--set",
        "saxml.http.service.loadBalancerSourceRanges={10.0.0.0/8}",
    )
    (svc,) = [d for d in docs if d["kind"] == "Service"]
    assert "annotations" not in svc["metadata"]
    assert svc["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]


def test_make_sax_finds_the_http_service_the_chart_renders():
    from launcher.client.serve.saxml_http import HTTP_COMPONENT, HTTP_PORT

    docs = render(None, "--set", "serving.engine=saxml")
    (svc,) = [d for d in docs if d["kind"] == "Service"]
    assert svc["metadata"]["labels"]["app.kubernetes.io/component"] == HTTP_COMPONENT
    assert svc["spec"]["ports"][0]["port"] == HTTP_PORT


def test_helm_test_expects_every_host_of_every_slice():
    docs = render(CHART.parents[1] / "values" / "v6e-16-x2.yaml")
    (pod,) = [d for d in docs if d["kind"] == "Pod"]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert "--expect-nodes=9" in pod["spec"]["containers"][0]["command"]  # head + 2 x 4


def test_quantities_and_names_render_as_strings():
    """A YAML number where a CRD wants int-or-string is refused (KubeRay's `0.5` CPU, a `0`
    account name): found by the control plane's dry run of drawn values; rendered quoted."""
    docs = render(
        None,
        "--set",
        "ray.worker.resources.requests.cpu=0.5",
        "--set",
        "global.shmSizeLimit=0.5",
        "--set-string",
        "ray.serviceAccount.name=0",
    )
    (cluster,) = by_kind(docs, "RayCluster")
    pod = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert pod["containers"][0]["resources"]["requests"]["cpu"] == "0.5"
    assert [v["emptyDir"]["sizeLimit"] for v in pod["volumes"] if v["name"] == "dshm"] == ["0.5"]
    assert pod["serviceAccountName"] == "0"


def test_workers_turn_their_termination_into_a_preemption_notice():
    """The worker pods' preStop hook is the launcher's own in-cluster command with the pod's
    grace period (a command the launcher parses: a renamed flag fails here); the head has none
    (its pod going ends the cluster, not a host)."""
    from launcher.runtime.commands import parser

    cluster = _ray_cluster("--set", "ray.worker.terminationGracePeriodSeconds=120")
    worker = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["terminationGracePeriodSeconds"] == 120
    command = worker["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:3] == JOB_ENTRYPOINT
    ns = parser().parse_args(command[3:])
    assert (ns.command, ns.grace) == ("preemption-notice", 120)
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    assert "lifecycle" not in head["containers"][0] and "terminationGracePeriodSeconds" not in head
    # Null: Kubernetes' defaults, no hook.
    plain = _ray_cluster("--set", "ray.worker.terminationGracePeriodSeconds=null")
    worker = plain["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert "lifecycle" not in worker["containers"][0]


def test_the_hugging_face_token_reaches_every_ray_host_from_its_secret_only():
    """`import hf://` downloads on the head, MaxText's Hub datasets read on the workers: both
    get huggingface_hub's HF_TOKEN (launcher.runtime.models.hf_hub.TOKEN_ENV) from the Secret,
    never as a value in the rendered objects."""
    from launcher.runtime.models.hf_hub import TOKEN_ENV

    cluster = _ray_cluster("--set", "ray.hfToken.secretName=hf-token")
    pods = [cluster["spec"]["headGroupSpec"]["template"]["spec"]]
    pods += [g["template"]["spec"] for g in cluster["spec"]["workerGroupSpecs"]]
    for pod in pods:
        (token,) = [e for e in pod["containers"][0]["env"] if e["name"] == TOKEN_ENV]
        assert token == {
            "name": TOKEN_ENV,
            "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
        }
    unset = _ray_cluster()
    head = unset["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert TOKEN_ENV not in [e["name"] for e in head["env"]]


def test_preflight_reads_the_grace_period_the_chart_renders():
    """What preflight sets the save against is what the chart gives the worker pods: read back
    from a release's RayCluster (pod_grace_seconds), and the chart's default is GKE's Spot notice,
    the launcher's fallback for values files that leave it out."""
    from launcher.core.tpu.preemption import DEFAULT_GRACE_S, pod_grace_seconds
    from launcher.core.values_file import load_values

    worker = load_values(CHART / "values.yaml")["ray"]["worker"]
    assert worker["terminationGracePeriodSeconds"] == DEFAULT_GRACE_S
    for given, expected in (([], DEFAULT_GRACE_S), (["=120"], 120), (["=null"], None)):
        args = [f"--set=ray.worker.terminationGracePeriodSeconds{given[0]}"] if given else []
        worker = _ray_cluster(*args)["spec"]["workerGroupSpecs"][0]["template"]["spec"]
        assert pod_grace_seconds(worker) == expected, given


@pytest.mark.parametrize(
    ("capacity", "labels", "tolerated"),
    [
        ("spot", {"cloud.google.com/gke-spot": "true"}, "cloud.google.com/gke-spot"),
        (
            "reservation",
            {
                "cloud.google.com/reservation-name": "tpu-res-1",
                "cloud.google.com/reservation-affinity": "specific",
            },
            None,
        ),
        ("flex-start", {"cloud.google.com/gke-flex-start": "true"}, None),
        ("on-demand", {}, None),
    ],
)
def test_every_tpu_pod_asks_for_the_capacity_its_slice_is_obtained_with(
    capacity, labels, tolerated
):
    """Training workers and the vLLM server alike carry the node labels GKE gives each kind of
    capacity (and tolerate a Spot pool's taint); the head, on the CPU pool, carries none."""
    sets = [f"--set=ray.worker.tpu.capacity={capacity}", f"--set=vllm.tpu.capacity={capacity}"]
    if capacity == "reservation":
        sets += [
            "--set=ray.worker.tpu.reservation=tpu-res-1",
            "--set=vllm.tpu.reservation=tpu-res-1",
        ]
    cluster = _ray_cluster(*sets)
    worker = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    vllm_values = CHART.parents[1] / "values" / "v6e-8-vllm.yaml"
    (server,) = [d for d in render(vllm_values, *sets) if d["kind"] == "Deployment"]
    for pod in (worker, server["spec"]["template"]["spec"]):
        assert labels.items() <= pod["nodeSelector"].items(), pod["nodeSelector"]
        keys = [t["key"] for t in pod.get("tolerations", [])]
        assert (tolerated in keys) if tolerated else "cloud.google.com/gke-spot" not in keys
    assert not labels.keys() & (head.get("nodeSelector") or {}).keys()


def test_flex_start_under_a_kueue_queue_is_queued_provisioning():
    """GKE's queued provisioning (the ProvisioningRequest check `gke queue` adds on flex-start)
    makes nodes labelled and tainted cloud.google.com/gke-queued: the workers select and
    tolerate them, as Google's queued-provisioning examples do; the same values without a
    queue are flex-start VMs. Facts: launcher.core.tpu.capacity.QUEUED_FLEX_START."""
    from launcher.core.tpu.capacity import CAPACITIES, FLEX_START, QUEUED_FLEX_START

    flex = ["--set=ray.worker.tpu.capacity=flex-start"]
    for sets, capacity in (
        (flex, CAPACITIES[FLEX_START]),
        ([*flex, "--set=kueue.queueName=team-a"], QUEUED_FLEX_START),
    ):
        worker = _ray_cluster(*sets)["spec"]["workerGroupSpecs"][0]["template"]["spec"]
        assert capacity.node_labels.items() <= worker["nodeSelector"].items(), worker
        for toleration in capacity.tolerations():
            assert toleration in worker["tolerations"], worker["tolerations"]
    assert "cloud.google.com/gke-flex-start" not in worker["nodeSelector"]


def test_a_rayjob_release_is_the_same_cluster_held_only_while_its_job_runs():
    """ray.job.enabled renders a RayJob whose cluster is the standing RayCluster's spec, byte for
    byte (one path renders both), with the launcher's train entrypoint; queued in Kueue it is
    created suspended and labelled with its queue and priority; helm test's cluster check, which
    needs a standing cluster, is left out."""
    job = [
        "--set=ray.job.enabled=true",
        '--set-json=ray.job.args=["base.yml","run_name=it\'s","steps=10"]',
    ]
    queued = ["--set=kueue.queueName=team-a", "--set=kueue.priorityClass=high"]
    values = CHART.parents[1] / "values" / "v6e-16-x2.yaml"
    docs = render(values, *job, *queued)
    (rayjob,) = [d for d in docs if d["kind"] == "RayJob"]
    assert not [d for d in docs if d["kind"] == "RayCluster" or d["kind"] == "Pod"]
    assert rayjob["spec"]["rayClusterSpec"] == _ray_cluster()["spec"]
    spec = rayjob["spec"]
    assert shlex.split(spec["entrypoint"]) == [
        *("python", "-m", "launcher.runtime", "train"),
        *("base.yml", "run_name=it's", "steps=10"),
    ]
    assert spec["shutdownAfterJobFinishes"] is True and spec["suspend"] is True
    labels = rayjob["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-a"
    assert labels["kueue.x-k8s.io/priority-class"] == "high"
    # Not queued: it starts at once.
    (plain,) = [d for d in render(values, *job) if d["kind"] == "RayJob"]
    assert "suspend" not in plain["spec"]
    assert not any(k.startswith("kueue.x-k8s.io/") for k in plain["metadata"]["labels"])
    # A standing cluster queues the same way.
    cluster = _ray_cluster(*queued)
    assert cluster["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"


@pytest.mark.parametrize("framework", NAMES)
def test_the_framework_picks_the_image_and_the_job_command(framework):
    """ray.framework is one value: every Ray container runs that framework's launcher image (the
    appVersion with its tag suffix, as launcher.core.job.frameworks and `tpu-launcher image` tag
    it), and a RayJob runs its train command."""
    chosen = FRAMEWORKS[framework]
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["properties"]["ray"]["properties"]["framework"]["enum"] == list(NAMES)
    values = CHART.parents[1] / "values" / "v6e-16.yaml"
    docs = render(values, f"--set=ray.framework={framework}")
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    images = {
        c["image"]
        for d in docs
        if d["kind"] in ("RayCluster", "Pod")
        for c in _containers(d)
        if "launcher" in c["image"]
    }
    assert images == {f"us-docker.pkg.dev/my-project/tpu-stack/launcher:{app_version}"
                      f"{chosen.tag_suffix}"}  # fmt: skip
    job = ["--set=ray.job.enabled=true", '--set-json=ray.job.args=["--run_name=r","t.py"]']
    (rayjob,) = by_kind(render(values, f"--set=ray.framework={framework}", *job), "RayJob")
    assert shlex.split(rayjob["spec"]["entrypoint"]) == [
        *JOB_ENTRYPOINT, chosen.command, "--run_name=r", "t.py"
    ]  # fmt: skip


def _containers(doc: dict) -> list[dict]:
    if doc["kind"] == "Pod":
        return doc["spec"]["containers"]
    groups = [doc["spec"]["headGroupSpec"], *doc["spec"].get("workerGroupSpecs", [])]
    return [c for g in groups for c in g["template"]["spec"]["containers"]]


def test_every_command_the_chart_runs_goes_through_the_clusters_door():
    """Each command a rendered pod runs of the launcher (a worker's preStop hook, the idle
    sidecar, helm test's checks, a RayJob's entrypoint) is `python -m launcher.runtime` and one
    of its commands, with arguments its parser takes: the chart's copy of the module's name
    (tpu-stack.runtimeModule) is the launcher's (launcher.core.runtime_door)."""
    from launcher.runtime.commands import parser

    values = CHART.parents[1] / "values" / "v6e-16.yaml"
    sets = ["--set=ray.worker.tpu.releaseIdleAfterSeconds=1800",
            "--set=ray.worker.terminationGracePeriodSeconds=60"]  # fmt: skip
    job = ["--set=ray.job.enabled=true", '--set-json=ray.job.args=["--run_name=r","t.py"]']
    run: list[list[str]] = []
    for docs in (render(values, *sets), render(values, *job)):
        for doc in docs:
            if doc["kind"] == "RayJob":
                run.append(shlex.split(doc["spec"]["entrypoint"]))
            if doc["kind"] not in ("RayCluster", "Pod", "RayJob"):
                continue
            for c in _containers(doc) if doc["kind"] != "RayJob" else []:
                hook = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
                run += [w for w in (c.get("command"), hook) if w and "python" in w[0]]
    commands = {words[3] for words in run}
    assert commands >= {"train", "preemption-notice", "idle-release", "cluster-check"}, run
    for words in run:
        assert words[:3] == JOB_ENTRYPOINT, words
        if words[3] not in ("train", "train-torch"):  # handed their words unparsed
            parser().parse_args(words[3:])
