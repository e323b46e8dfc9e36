"""`tpu-launcher gke plan|up|down`, `image` and `install`: the gcloud commands a release needs,
read from the chart's own rendering. gcloud and GKE cannot run here: the commands are pinned per
values file against the GKE tutorials' own (written below as facts), and `gke up` runs against a
FAKE gcloud (tests/support/fake_gcloud.py: GKE's state in a file, its refusals), which shows the
order, the skip of what exists, and the stop at the first failure. The whole road, with the
release installed in the test control plane, is tests/cluster/test_gke_walk.py."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess

import pytest

from harness.helm import CHART, VALUES_FILES, helm, refused, render, run_helm
from harness.paths import REPO
from launcher import cli
from launcher.client.release.image_tag import of_checkout
from tests.support import fake_gcloud as fake_gcloud_module

pytestmark = pytest.mark.chart

# The node pools each values file needs: (name, machine type, --tpu-topology, --num-nodes).
# v6e-16 is the GKE Ray/MaxText tutorial's `node-pools create v6e-16 --machine-type=
# ct6e-standard-4t --tpu-topology=4x4 --num-nodes=4`; v5e-32-saxml its Saxml tutorial's two
# `--machine-type=ct5lp-hightpu-4t --tpu-topology=4x8 --num-nodes=8` pools (one per slice).
POOLS = {
    "v6e-16.yaml": [("tpu-ray-v6e-16-0", "ct6e-standard-4t", "4x4", "4")],
    "v6e-16-x2.yaml": [
        ("tpu-ray-v6e-16-0", "ct6e-standard-4t", "4x4", "4"),
        ("tpu-ray-v6e-16-1", "ct6e-standard-4t", "4x4", "4"),
    ],
    "v5e-32-saxml.yaml": [
        ("tpu-sax-v5litepod-32-0", "ct5lp-hightpu-4t", "4x8", "8"),
        ("tpu-sax-v5litepod-32-1", "ct5lp-hightpu-4t", "4x8", "8"),
    ],
    "v5p-16.yaml": [("tpu-ray-v5p-16-0", "ct5p-hightpu-4t", "2x2x2", "2")],
    "v4-16.yaml": [("tpu-ray-v4-16-0", "ct4p-hightpu-4t", "2x2x2", "2")],
    "v6e-256.yaml": [("tpu-ray-v6e-256-0", "ct6e-standard-4t", "16x16", "64")],
    # single host: no --tpu-topology (GKE refuses it on single-host pools)
    "v6e-8-single-host.yaml": [("tpu-ray-v6e-8", "ct6e-standard-8t", None, "1")],
    # vLLM: one single-host node per replica (the Deployment's pods)
    "v6e-8-vllm.yaml": [("tpu-vllm-v6e-8", "ct6e-standard-8t", None, "1")],
    # Ironwood: 4 chips per tpu7x-standard-4t VM; multi-host pools are placed by a workload
    # policy, never --tpu-topology (GKE: About Ironwood (TPU7x) in GKE).
    "tpu7x-16.yaml": [("tpu-ray-tpu7x-16-0", "tpu7x-standard-4t", None, "2")],
    "tpu7x-128.yaml": [("tpu-ray-tpu7x-128-0", "tpu7x-standard-4t", None, "16")],
    "tpu7x-8-vllm.yaml": [("tpu-vllm-tpu7x-8", "tpu7x-standard-4t", None, "1")],
    # vLLM on a multi-host slice: the RayService's worker group, one pool per slice
    "v6e-16-vllm.yaml": [("tpu-vllm-v6e-16-0", "ct6e-standard-4t", "4x4", "4")],
    "cpu.yaml": [],
}


TARGET_ENV = ("PROJECT_ID", "CLUSTER_NAME", "LOCATION", "NODE_ZONE", "BUCKET")


@pytest.fixture(autouse=True)
def no_target_in_the_environment(monkeypatch):
    """The target comes from flags here, never from the developer's own exports."""
    for name in TARGET_ENV:
        monkeypatch.delenv(name, raising=False)


def _plan(capsys, values: str, *flags: str) -> str:
    args = ["gke", "plan", "--values", str(REPO / "values" / values), "--chart", str(CHART)]
    assert cli.main([*args, "--helm", str(helm(3)), *flags]) == 0
    return capsys.readouterr().out


def _commands(script: str) -> list[list[str]]:
    """The commands the plan runs, each as its words (continuation lines joined; the checks
    that guard them and the loop's listing left out)."""
    joined = script.replace(" \\\n    ", " ")
    lines = [line.strip() for line in joined.splitlines()]
    return [
        shlex.split(line) for line in lines if line.startswith("gcloud") and not line.endswith("||")
    ]


def _flag(words: list[str], name: str) -> str | None:
    found = [w.split("=", 1)[1] for w in words if w.startswith(f"--{name}=")]
    return found[0] if found else None


@pytest.mark.parametrize("values", sorted(POOLS))
def test_node_pools_per_values_file(capsys, values):
    pools = [
        c
        for c in _commands(_plan(capsys, values))
        if c[1:4] == ["container", "node-pools", "create"] and not c[4].endswith("-cpu")
    ]
    assert [
        (c[4], _flag(c, "machine-type"), _flag(c, "tpu-topology"), _flag(c, "num-nodes"))
        for c in pools
    ] == POOLS[values]
    for c in pools:
        assert ("--placement-type=COMPACT" in c) == (_flag(c, "tpu-topology") is not None)


TUTORIAL = ("--project=my-proj", "--cluster=ml", "--location=us-east5-b", "--bucket=my-ckpts")


# The CPU pool each values file needs: the smallest n2-standard machine whose room (GKE's
# allocatable less its DaemonSets) holds the largest pod without TPUs, and enough of them. The
# Ray head's 8 CPU (the GKE tutorial's) need an n2-standard-16; cpu.yaml's 1-CPU head and
# workers and the Saxml release's small servers fit one n2-standard-4.
CPU_POOLS = {
    **{name: ("n2-standard-16", "1") for name in POOLS},
    "cpu.yaml": ("n2-standard-4", "1"),
    "v5e-32-saxml.yaml": ("n2-standard-4", "1"),
    # vLLM's pods all hold TPUs: helm test's pod runs on the cluster's own node, no pool for it.
    "v6e-8-vllm.yaml": None,
    "tpu7x-8-vllm.yaml": None,
    # The RayService's head: 2 CPU and 8 GiB beside the bucket's sidecar.
    "v6e-16-vllm.yaml": ("n2-standard-4", "1"),
}


@pytest.mark.parametrize("values", sorted(CPU_POOLS))
def test_a_cpu_pool_holds_the_pods_without_tpus(capsys, values):
    pools = [
        (_flag(c, "machine-type"), _flag(c, "num-nodes"), "--workload-metadata=GKE_METADATA" in c)
        for c in _commands(_plan(capsys, values))
        if c[1:4] == ["container", "node-pools", "create"] and c[4].endswith("-cpu")
    ]
    assert pools == ([(*CPU_POOLS[values], True)] if CPU_POOLS[values] else [])


def test_the_whole_plan_for_the_tutorials_slice_on_an_empty_project(fake_gcloud, capsys):
    script = _plan(capsys, "v6e-16.yaml", *TUTORIAL, "--capacity=spot")
    commands = _commands(script)
    # In the order they can run, each guarded by the check that skips it when done: the APIs an
    # empty project lacks first, the TPU slice last.
    apis = [
        f"{api}.googleapis.com"
        for api in (
            "container", "compute", "containerfilesystem", "artifactregistry", "cloudbuild",
            "storage", "iam",
        )
    ]  # fmt: skip
    assert [c[1:4] for c in commands] == [
        *(["services", "enable", api] for api in apis),
        ["container", "clusters", "create"],
        ["container", "clusters", "update"],  # add-ons, when the cluster was there before
        ["container", "clusters", "update"],  # Workload Identity, likewise
        ["container", "clusters", "get-credentials"],
        ["container", "node-pools", "create"],  # CPU: the head
        ["projects", "add-iam-policy-binding", "my-proj"],  # the nodes' logs and metrics
        ["artifacts", "repositories", "create"],
        ["artifacts", "repositories", "add-iam-policy-binding"],  # the nodes may pull
        ["iam", "service-accounts", "create"],  # the build's own account
        ["artifacts", "repositories", "add-iam-policy-binding"],  # which may push there
        ["projects", "add-iam-policy-binding", "my-proj"],  # and write its logs
        ["storage", "buckets", "create"],  # the source's staging bucket
        ["storage", "buckets", "add-iam-policy-binding"],  # which it may read
        ["builds", "submit", "."],
        ["auth", "configure-docker", "us-east5-docker.pkg.dev"],  # Helm's login, for the chart
        ["storage", "buckets", "create"],
        ["storage", "buckets", "add-iam-policy-binding"],
        ["container", "node-pools", "create"],  # the TPU slice last: nothing bills before it
    ]
    named = {(c[1], c[2], c[3]): c for c in commands}
    create = named["container", "clusters", "create"]
    # The GKE tutorial's `clusters create --addons=RayOperator --addons GcsFuseCsiDriver
    # --workload-pool=$PROJECT_ID.svc.id.goog`, labelled so `gke down` knows it made it; GKE's
    # default add-ons named too (gcloud: "The others will be disabled"), and Dataplane V2 so
    # that the chart's NetworkPolicies are enforced; image streaming, so a TPU host's pod starts
    # before the launcher's image is all pulled (GKE: "Use Image streaming").
    for flag in (
        "--addons=HttpLoadBalancing,HorizontalPodAutoscaling,RayOperator,GcsFuseCsiDriver",
        "--enable-dataplane-v2",
        "--enable-image-streaming",
        "--workload-pool=my-proj.svc.id.goog",
        "--workload-metadata=GKE_METADATA",
        "--labels=created-by=tpu-launcher",
    ):
        assert flag in create, create
    cpu, tpu = [c for c in commands if c[1:4] == ["container", "node-pools", "create"]]
    # The head asks for 8 CPU and 16Gi (the tutorial's): an n2-standard-8 leaves under 8 CPU
    # to pods after GKE's reservations, so the pool is n2-standard-16.
    assert (cpu[4], _flag(cpu, "machine-type"), _flag(cpu, "num-nodes")) == (
        "tpu-cpu",
        "n2-standard-16",
        "1",
    )
    # The tutorial's `node-pools create v6e-16 --machine-type=ct6e-standard-4t
    # --threads-per-core=1 --tpu-topology=4x4 --num-nodes=4`.
    for flag in ("--threads-per-core=1", "--tpu-topology=4x4", "--num-nodes=4", "--spot"):
        assert flag in tpu, tpu
    for pool in (cpu, tpu):
        assert "--workload-metadata=GKE_METADATA" in pool
    build = named["builds", "submit", "."]
    image = f"us-east5-docker.pkg.dev/my-proj/tpu-stack/launcher:{of_checkout(REPO).tag(CHART)}"
    assert f"--substitutions=_IMAGE={image},_FRAMEWORK=jax" in build
    assert "--config=images/launcher/cloudbuild.yaml" in build
    account = "projects/my-proj/serviceAccounts/tpu-launcher-build@my-proj.iam.gserviceaccount.com"
    assert f"--service-account={account}" in build
    assert "--gcs-source-staging-dir=gs://my-proj_cloudbuild/source" in build
    # The chart beside the image, packaged for it: the chart pulled from there runs that image.
    joined, helm3 = script.replace(" \\\n    ", " "), helm(3)
    tag = of_checkout(REPO).tag(CHART)
    assert f"{helm3} package {CHART} --app-version {tag} --destination .local/charts" in joined
    pushed = (
        "push .local/charts/tpu-stack-0.1.0.tgz oci://us-east5-docker.pkg.dev/my-proj/tpu-stack"
    )
    assert f"{helm3} {pushed}" in joined
    bucket = named["storage", "buckets", "create"]
    assert bucket[4:] == [
        "gs://my-ckpts",
        "--project=my-proj",
        "--location=us-east5",  # a bucket's location is a region: the zone's
        "--uniform-bucket-level-access",
        "--enable-hierarchical-namespace",
    ]
    # The release's own service account (rendered by the chart), as the tutorial binds it.
    assert (
        "--member=principal://iam.googleapis.com/projects/${PROJECT_NUMBER}/locations/global/"
        "workloadIdentityPools/my-proj.svc.id.goog/subject/ns/default/sa/tpu-ray "
        "--role=roles/storage.objectUser"
    ) in " ".join(" ".join(c) for c in commands)
    assert "PROJECT_NUMBER=$(gcloud projects describe my-proj" in script
    # GKE's nodes run as the Compute Engine default account: it may pull the image, and only
    # that. The image is built by an account of its own, granted each thing on its resource
    # alone (Cloud Build: "Run builds with a user-managed service account"), never the Cloud
    # Build role the default account (the nodes', in projects made since 2024) would need.
    grants = [c for c in commands if "add-iam-policy-binding" in c[2:4]]
    nodes = "serviceAccount:${PROJECT_NUMBER}-compute@developer.gserviceaccount.com"
    builder = "serviceAccount:tpu-launcher-build@my-proj.iam.gserviceaccount.com"

    def on(c: list[str]) -> str:  # the resource a grant is on
        return c[3 if c[1] == "projects" else 4]

    given = {(_flag(c, "member"), _flag(c, "role"), on(c)) for c in grants}
    assert {g for g in given if g[0] in (nodes, builder)} == {
        (nodes, "roles/container.defaultNodeServiceAccount", "my-proj"),  # the project
        (nodes, "roles/artifactregistry.reader", "tpu-stack"),  # the repository
        (builder, "roles/artifactregistry.writer", "tpu-stack"),
        (builder, "roles/logging.logWriter", "my-proj"),
        (builder, "roles/storage.objectViewer", "gs://my-proj_cloudbuild"),  # its source
    }
    assert "cloudbuild.builds.builder" not in script
    assert "--release-channel=regular" in create
    assert "Set " not in script  # nothing left to fill in


def test_an_ironwood_slice_is_placed_by_a_workload_policy_made_first(capsys):
    """GKE's "About Ironwood (TPU7x) in GKE": a multi-host tpu7x pool is placed by a workload
    policy (`gcloud compute resource-policies create workload-policy ... --type=HIGH_THROUGHPUT
    --accelerator-topology=2x2x2`) named by `--placement-policy`, which replaces
    `--tpu-topology`; GKE Standard 1.34.0-gke.2201000 or later."""
    script = _plan(capsys, "tpu7x-16.yaml", *TUTORIAL, "--location=us-central1-c")
    commands = _commands(script)
    (policy,) = [
        c
        for c in commands
        if c[1:5] == ["compute", "resource-policies", "create", "workload-policy"]
    ]
    (pool,) = [
        c for c in commands if c[1:4] == ["container", "node-pools", "create"] and "tpu7x" in c[4]
    ]
    assert commands.index(policy) < commands.index(pool)
    assert (_flag(policy, "type"), _flag(policy, "accelerator-topology")) == (
        "HIGH_THROUGHPUT",
        "2x2x2",
    )
    assert _flag(policy, "region") == "us-central1"  # the region of the zonal LOCATION
    assert _flag(pool, "placement-policy") == policy[5]
    assert not [c for c in commands if _flag(c, "tpu-topology")]
    # Checked before anything of the cluster changes: the script stops on an older one.
    assert "the cluster runs GKE 1.34.0-gke.2201000 or later (TPU tpu7x need it)" in script
    # A single-host Ironwood slice is one VM: no policy, no topology.
    single = _commands(_plan(capsys, "tpu7x-8-vllm.yaml", *TUTORIAL, "--location=us-central1-c"))
    assert not [c for c in single if c[1:3] == ["compute", "resource-policies"]]


def test_the_image_built_is_the_image_the_chart_renders(capsys):
    """One source: `image` builds, and `install` installs, what `helm template` renders for the
    same target."""
    rendered = run_helm(
        3,
        "template",
        "tpu",
        str(CHART),
        "-f",
        str(REPO / "values/v6e-16.yaml"),
        "--set",
        "ray.image.registry=us-east5-docker.pkg.dev",
        "--set",
        "ray.image.repository=my-proj/tpu-stack/launcher",
        "--set",
        f"ray.image.tag={of_checkout(REPO).tag(CHART)}",
        "--set",
        "global.gcsfuse.bucketName=my-ckpts",
    ).stdout
    images = set(re.findall(r"image: (\S+)", rendered))
    target = ["--project=my-proj", "--location=us-east5-b", "--bucket=my-ckpts"]
    values = ["--values", str(REPO / "values/v6e-16.yaml"), "--chart", str(CHART)]
    assert (
        cli.main(
            [
                "image",
                *values,
                *target,
                "--helm",
                str(helm(3)),
                "--dry-run",
                "--builder=cloud-build",
            ]
        )
        == 0
    )
    built = re.findall(r"_IMAGE=([^\s,]+)", capsys.readouterr().out)
    assert built and set(built) == images == {
        f"us-east5-docker.pkg.dev/my-proj/tpu-stack/launcher:{of_checkout(REPO).tag(CHART)}"
    }
    assert cli.main(["install", *values, *target, "--helm", str(helm(3)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "--set ray.image.registry=us-east5-docker.pkg.dev" in out
    assert "--set ray.image.repository=my-proj/tpu-stack/launcher" in out
    assert f"--set ray.image.tag={of_checkout(REPO).tag(CHART)}" in out
    assert "--set global.gcsfuse.bucketName=my-ckpts" in out


def _image_of(capsys, chart, *extra: str) -> str:
    target = ["--project=my-proj", "--location=us-east5-b", "--bucket=my-ckpts"]
    values = ["--values", str(REPO / "values/v6e-16.yaml"), "--chart", str(chart), *extra]
    argv = ["image", *values, *target, "--helm", str(helm(3)), "--dry-run"]
    assert cli.main([*argv, "--builder=cloud-build"]) == 0
    return re.findall(r"_IMAGE=([^\s,]+)", capsys.readouterr().out)[0]


def test_a_pytorch_release_builds_and_installs_the_torch_image(capsys):
    """ray.framework=torch: the image is built for torch (Cloud Build's _FRAMEWORK, the
    Dockerfile's FRAMEWORK) and tagged with its suffix, which the chart pairs with torch jobs."""
    tag = f"{of_checkout(REPO).tag(CHART)}-torch"
    assert _image_of(capsys, CHART, "--set", "ray.framework=torch").endswith(f":{tag}")
    target = ["--project=my-proj", "--location=us-east5-b", "--bucket=my-ckpts"]
    values = ["--values", str(REPO / "values/v6e-16.yaml"), "--chart", str(CHART)]
    argv = ["image", *values, *target, "--set", "ray.framework=torch", "--dry-run"]
    assert cli.main([*argv, "--helm", str(helm(3)), "--builder=docker"]) == 0
    assert "--build-arg FRAMEWORK=torch" in capsys.readouterr().out
    argv = ["install", *values, *target, "--set", "ray.framework=torch", "--dry-run"]
    assert cli.main([*argv, "--helm", str(helm(3))]) == 0
    assert f"--set ray.image.tag={tag}" in capsys.readouterr().out


def test_the_image_tag_changes_with_what_the_image_is_built_from(capsys, tmp_path):
    """`gke up` skips a tag the registry has and pods pull a tag once (IfNotPresent): a
    changed launcher must be a new tag. The tag is the appVersion and a hash of the Dockerfile
    and what it copies, so a change beside them (a test, a doc) keeps it."""
    import shutil

    checkout = tmp_path / "checkout"
    for part in ("charts", "images", "launcher", "values", "tests/support"):
        shutil.copytree(REPO / part, checkout / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", checkout)
    chart = checkout / "charts/tpu-stack"
    first = _image_of(capsys, chart)
    assert re.fullmatch(r".*/launcher:0\.1\.0-[0-9a-f]{12}", first), first
    (checkout / "tests/support/note.txt").write_text("not in the image")
    assert _image_of(capsys, chart) == first
    entry = checkout / "launcher/runtime/train/entrypoint.py"
    entry.write_text(entry.read_text() + "\n# changed\n")
    assert _image_of(capsys, chart) != first
    # A tag the values pin is the tag, and --set ray.image.tag wins at install.
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text("ray:\n  image:\n    tag: team-1.2\n")
    assert _image_of(capsys, chart, "--values", str(pinned)).endswith("/launcher:team-1.2")


def test_the_package_the_chart_and_the_image_have_one_version():
    import tomllib

    import yaml

    package = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert package == chart["version"] == chart["appVersion"]


def test_install_makes_the_serving_key_secret_the_pods_read(capsys):
    """vLLM's pods read their API key from a Secret the chart does not render: install makes it
    when it is missing, the key through a private file (never on a command line)."""
    target = ["--project=my-proj", "--location=us-east5-b", "--bucket=my-ckpts"]
    values = ["--values", str(REPO / "values/v6e-8-vllm.yaml"), "--chart", str(CHART)]
    assert cli.main(["install", *values, *target, "--helm", str(helm(3)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    (create,) = [line for line in out.splitlines() if "create secret generic" in line]
    assert "kubectl -n default create secret generic vllm-api-key --from-file=api-key=/" in create
    assert out.index("install the release") < out.index("create Secret vllm-api-key")
    # A --set the install passes names the Secret the pods read, so it is the one made.
    extra = ["--set", "vllm.apiKey.secretName=serve-key"]
    assert cli.main(["install", *values, *target, *extra, "--helm", str(helm(3)), "--dry-run"]) == 0
    assert "create secret generic serve-key --from-file=api-key=" in capsys.readouterr().out
    # A training release's pods read no Secret of the user's (Ray's token is KubeRay's).
    values = ["--values", str(REPO / "values/v6e-16.yaml"), "--chart", str(CHART)]
    assert cli.main(["install", *values, *target, "--helm", str(helm(3)), "--dry-run"]) == 0
    assert "create secret" not in capsys.readouterr().out


def test_a_rayjobs_job_is_checked_as_submit_checks_it_before_helm_runs(capsys):
    """A RayJob runs its job once KubeRay has made its cluster: a bad key is refused here, with
    submit's message, before Helm installs anything."""
    target = ["--project=my-proj", "--location=us-east5-b", "--bucket=my-ckpts"]
    values = ["--values", str(REPO / "values/v6e-16.yaml"), "--chart", str(CHART)]
    rayjob = ["--set", "ray.job.enabled=true", "--helm", str(helm(3)), "--dry-run"]
    for args, key, said in (
        ("base.yml,steps=abc,run_name=r", "steps", "'abc' is not a whole number"),
        ("base.yml,stepz=3,run_name=r", "stepz", "did you mean steps?"),
        ("base.yml,steps=3", "run_name", "is required"),
        # The RayJob's own slice, as its cluster asks for it: a job bound elsewhere is refused.
        ("--tpu=v5p-16,base.yml,steps=3,run_name=r", "accelerator_type", "v6e"),
    ):
        job = ["--set", f"ray.job.args={{{args}}}"]
        assert cli.main(["install", *values, *target, *job, *rayjob]) == 2, args
        out, err = capsys.readouterr()
        assert f"error: ray.job.args: {key}: " in err and said in err, err
        assert "helm upgrade" not in out, out
    job = ["--set", "ray.job.args={base.yml,steps=3,run_name=r}"]
    assert cli.main(["install", *values, *target, *job, *rayjob]) == 0
    assert "helm upgrade --install tpu" in capsys.readouterr().out


def test_a_values_file_that_is_not_there_is_named(capsys):
    args = ["gke", "plan", "-f", "values/v6e-61.yaml", "--chart", str(CHART)]
    args += ["--helm", str(helm(3))]
    assert cli.main(args) == 2
    assert "error: --values: no values file values/v6e-61.yaml" in capsys.readouterr().err


def test_install_without_a_project_names_the_fix(capsys):
    args = ["install", "--values", str(REPO / "values/v6e-16.yaml"), "--chart", str(CHART)]
    assert cli.main([*args, "--helm", str(helm(3)), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "--project" in err and "PROJECT_ID" in err and "--registry" in err


def test_a_google_service_account_gets_the_bucket_and_the_binding(capsys, tmp_path):
    gsa = "trainer@my-proj.iam.gserviceaccount.com"
    extra = tmp_path / "gsa-values.yaml"
    extra.write_text(f"ray:\n  serviceAccount:\n    gcpServiceAccount: {gsa}\n")
    script = _plan(capsys, "v6e-16.yaml", "--values", str(extra), "--project=my-proj")
    assert f"--member=serviceAccount:{gsa}" in script
    assert "--role=roles/iam.workloadIdentityUser" in script
    assert "--member=serviceAccount:my-proj.svc.id.goog[default/tpu-ray]" in script
    assert "principal://" not in script  # the Google account is bound, not the pods' own
    assert "gcloud services enable iam.googleapis.com" in script  # IAM's API, for that binding


def test_set_is_taken_by_the_plan_as_by_install(capsys):
    """`--set` on gke plan (and up, image, down) renders the release install will make: here a
    v5p-16 in place of the values file's v6e-16."""
    v5p = ("--set", "ray.worker.tpu.type=v5p-16", "--location=us-east5-a")  # a v5p zone
    script = _plan(capsys, "v6e-16.yaml", *TUTORIAL, *v5p)
    pools = [c for c in _commands(script) if c[1:4] == ["container", "node-pools", "create"]]
    assert [(_flag(c, "machine-type"), _flag(c, "tpu-topology")) for c in pools][-1] == (
        "ct5p-hightpu-4t",
        "2x2x2",
    )


def test_unset_places_are_named(capsys, monkeypatch, tmp_path):
    for name in TARGET_ENV:  # nothing from the tutorial's variables ...
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # ... nor a gcloud configuration
    script = _plan(capsys, "v6e-16.yaml")
    assert "# Set BUCKET, CLUSTER_NAME, LOCATION, NODE_ZONE, PROJECT_ID, REGION first" in script


def test_the_target_comes_from_the_tutorials_environment_variables(capsys, monkeypatch):
    for name, value in zip(TARGET_ENV, ("p1", "c1", "europe-west4-a", "", "ck1"), strict=True):
        monkeypatch.setenv(name, value)
    script = _plan(capsys, "v6e-16.yaml")
    assert "gcloud container clusters create c1" in script and "gs://ck1" in script
    assert "--location=europe-west4" in script and "Set " not in script


@pytest.fixture
def fake_gcloud(tmp_path, monkeypatch):
    """A FAKE gcloud (and docker) on PATH; returns its state file."""
    state = tmp_path / "gke-state.json"
    fake_gcloud_module.install(tmp_path / "bin", state, real_helm=helm(3))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    return state


def test_project_and_location_fall_back_to_gclouds_own_configuration(
    fake_gcloud, monkeypatch, capsys
):
    """Neither a flag nor PROJECT_ID/LOCATION: `gcloud config set project|compute/zone` decide,
    as they do for gcloud's own commands (xpk reads them too)."""
    fake_gcloud.write_text(
        json.dumps({"config": {"project": "cfg-proj", "compute/zone": "us-east5-b"}})
    )
    for name in TARGET_ENV:
        monkeypatch.delenv(name, raising=False)
    script = _plan(capsys, "v6e-16.yaml", "--cluster=ml", "--bucket=my-ckpts")
    assert "--project=cfg-proj" in script and "--location=us-east5-b" in script
    assert "${PROJECT_ID}" not in script


def _gke(action: str, values: str, *flags: str, helm_bin: str = "helm") -> int:
    """`gke ACTION`; its helm the fake's on PATH (its registry is the fake's), unless named."""
    args = ["gke", action, *TUTORIAL, "--values", str(REPO / "values" / values)]
    return cli.main([*args, "--chart", str(CHART), "--helm", helm_bin, *flags])


def _ran(state) -> list[list[str]]:
    """What changed something: every call but the checks and reads (describe, list, --help;
    helm's template and show)."""
    calls = json.loads(state.read_text()).get("calls", [])
    reads = {"describe", "list", "template", "show", "--help", "get-server-config"}
    return [c[1:] for c in calls if not reads & set(c)]


def test_gke_up_runs_every_step_in_order_then_skips_what_exists(fake_gcloud, capsys):
    assert _gke("up", "v6e-16-x2.yaml") == 0
    ran = _ran(fake_gcloud)
    assert [r[:3] for r in ran] == [
        *(
            ["services", "enable", f"{api}.googleapis.com"]  # an empty project has none on
            for api in (
                "container",
                "compute",
                "containerfilesystem",
                "artifactregistry",
                "cloudbuild",
                "storage",
                "iam",
            )
        ),
        ["container", "clusters", "create"],  # then add-ons and WI are there: skipped
        ["container", "clusters", "get-credentials"],
        ["container", "node-pools", "create"],  # the CPU pool
        ["projects", "add-iam-policy-binding", "my-proj"],  # the nodes' logs and metrics
        ["artifacts", "repositories", "create"],
        ["artifacts", "repositories", "add-iam-policy-binding"],  # the nodes may pull
        ["iam", "service-accounts", "create"],  # the build's own account
        ["artifacts", "repositories", "add-iam-policy-binding"],  # which may push there
        ["projects", "add-iam-policy-binding", "my-proj"],  # and write its logs
        ["storage", "buckets", "create"],  # the source's staging bucket
        ["storage", "buckets", "add-iam-policy-binding"],  # which it may read
        ["builds", "submit", "."],
        ["auth", "configure-docker", "us-east5-docker.pkg.dev"],  # Helm's login, for the chart
        ["package", str(CHART), "--app-version"],  # the chart, packaged for the image
        [
            "push",
            ".local/charts/tpu-stack-0.1.0.tgz",
            "oci://us-east5-docker.pkg.dev/my-proj/tpu-stack",
        ],
        ["storage", "buckets", "create"],
        ["storage", "buckets", "add-iam-policy-binding"],
        ["container", "node-pools", "create"],  # the TPU slices last: they bill most
        ["container", "node-pools", "create"],
    ]
    # The captured project number is substituted into the principal.
    assert "projects/123456789012/locations/global" in " ".join(ran[-3])
    assert "done: 33 steps" in capsys.readouterr().out  # the channel's version checked first

    before = len(_ran(fake_gcloud))
    assert _gke("up", "v6e-16-x2.yaml") == 0
    again = _ran(fake_gcloud)[before:]
    # A second run changes nothing that exists (credentials and the idempotent bindings rerun).
    assert [r[:3] for r in again] == [
        ["container", "clusters", "get-credentials"],
        ["projects", "add-iam-policy-binding", "my-proj"],
        ["artifacts", "repositories", "add-iam-policy-binding"],
        ["artifacts", "repositories", "add-iam-policy-binding"],
        ["projects", "add-iam-policy-binding", "my-proj"],
        ["storage", "buckets", "add-iam-policy-binding"],
        ["storage", "buckets", "add-iam-policy-binding"],
    ]
    assert "done already, skipped" in capsys.readouterr().out


def test_the_printed_plan_runs_twice_unattended_on_a_bucket_with_a_conditional_grant(
    fake_gcloud, capsys, tmp_path
):
    """A release that trains and serves from one bucket: the vLLM compile cache's grant has an
    IAM condition, after which gcloud refuses, with no terminal to ask on, any grant on that
    bucket that does not say its condition. The plan, run as printed from a script (stdin not a
    terminal), runs twice and the second run changes nothing; one grant without
    `--condition=None` fails the rerun with gcloud's words."""
    both = tmp_path / "train-and-serve.yaml"
    both.write_text(
        "serving:\n  engine: vllm\nvllm:\n  model: /data/m\n  apiKey:\n    secretName: k\n"
        "  compileCache:\n    onBucket: true\n"
    )
    script = _plan(capsys, "v6e-16.yaml", *TUTORIAL, "--values", str(both), "--helm", "helm")

    def run(text: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-c", text], capture_output=True, text=True, stdin=subprocess.DEVNULL
        )

    first = run(script)
    assert first.returncode == 0, first.stderr
    state = json.loads(fake_gcloud.read_text())
    assert any("condition" in b for b in state["bindings"]), state["bindings"]
    before = len(_ran(fake_gcloud))
    again = run(script)
    assert again.returncode == 0, again.stderr
    rerun = _ran(fake_gcloud)[before:]
    assert not [c for c in rerun if {"create", "submit", "update", "delete"} & set(c)], rerun
    assert json.loads(fake_gcloud.read_text())["bindings"] == state["bindings"]
    # Every grant of the plan says its condition: one that did not would stop the rerun.
    grants = [c for c in _commands(script) if "add-iam-policy-binding" in c]
    assert grants and all(any(w.startswith("--condition=") for w in c) for c in grants), grants
    at = script.index("buckets add-iam-policy-binding gs://my-ckpts")  # training's grant
    end = script.index("--condition=None", at)
    broken = script[:end].rstrip(" \\\n") + script[end + len("--condition=None") :]
    failed = run(broken)
    assert failed.returncode != 0
    assert "prohibited in non-interactive mode" in failed.stderr, failed.stderr


def _a_cluster_made_elsewhere(state, *flags: str, dataplane_v2: bool = True) -> None:
    """The cluster `ml` as someone made it before, by hand (no label of ours)."""
    gke = fake_gcloud_module.Gcloud({})
    where = ["--project=my-proj", "--location=us-east5-b"]
    flags += ("--enable-dataplane-v2",) if dataplane_v2 else ()
    gke.run(["services", "enable", "container.googleapis.com", "--project=my-proj"])
    gke.run(["container", "clusters", "create", "ml", *where, *flags])
    state.write_text(json.dumps(gke.state))


def test_an_existing_cluster_that_enforces_no_network_policy_stops_gke_up(fake_gcloud, capsys):
    """A cluster on GKE's legacy dataplane without network policy enforcement stores the
    chart's NetworkPolicies and ignores them: gke up stops before changing anything and names
    both ways out; the fix's two commands are the order gcloud accepts; without the policies
    (said), the same cluster is taken."""
    flags = ("--workload-pool=my-proj.svc.id.goog", "--workload-metadata=GKE_METADATA")
    _a_cluster_made_elsewhere(fake_gcloud, *flags, dataplane_v2=False)
    assert _gke("up", "v6e-16.yaml") == 2
    err = capsys.readouterr().err
    assert "the cluster enforces NetworkPolicy" in err and "networkPolicy.enabled=false" in err
    assert not [r for r in _ran(fake_gcloud) if r[0] == "container"]
    first, then = re.findall(r"`(gcloud container clusters update [^`]+)`", err)
    gke = fake_gcloud_module.Gcloud(json.loads(fake_gcloud.read_text()))
    with pytest.raises(fake_gcloud_module.Refused, match="addon must be enabled first"):
        gke.run(shlex.split(then)[1:])
    gke.run(shlex.split(first)[1:])
    gke.run(shlex.split(then)[1:])
    assert fake_gcloud_module.enforces_network_policy(
        gke.state["clusters"]["my-proj/us-east5-b/ml"]
    )

    _a_cluster_made_elsewhere(fake_gcloud, *flags, dataplane_v2=False)
    assert _gke("up", "v6e-16.yaml", "--set", "networkPolicy.enabled=false") == 0


def test_gke_up_brings_an_existing_cluster_to_what_the_release_needs(fake_gcloud, capsys):
    """A cluster made without the add-ons or Workload Identity (as most are). Its pools lack the
    GKE metadata server, and moving a pool recreates its nodes (running pods and slices), so gke
    up turns on the add-ons and Workload Identity (no node changes), then stops and names the
    pools, with a fix gcloud now accepts (it refuses to move a pool to the metadata server of a
    cluster without Workload Identity: the order matters); asked (--migrate-node-metadata), it
    moves them."""
    _a_cluster_made_elsewhere(fake_gcloud, "--machine-type=n1-standard-16")
    assert _gke("up", "v6e-16.yaml") == 2
    err = capsys.readouterr().err
    assert "every node pool of the cluster uses the GKE metadata server" in err
    assert "not so (default-pool)" in err
    assert "--migrate-node-metadata" in err
    changed = [r[:4] for r in _ran(fake_gcloud) if r[0] == "container"]
    assert changed == [["container", "clusters", "update", "ml"]] * 2  # add-ons, then identity
    fix = re.search(r"`(gcloud container node-pools update [^`]+)`", err)[1]
    gke = fake_gcloud_module.Gcloud(json.loads(fake_gcloud.read_text()))
    gke.run(shlex.split(fix.replace("POOL", "default-pool"))[1:])  # gcloud takes it now

    assert _gke("up", "v6e-16.yaml", "--migrate-node-metadata") == 0
    ran = [r[:4] for r in _ran(fake_gcloud) if r[0] == "container"]
    assert ran[:4] == [
        ["container", "clusters", "update", "ml"],
        ["container", "clusters", "update", "ml"],
        ["container", "node-pools", "update", "default-pool"],
        ["container", "clusters", "get-credentials", "ml"],
    ]
    cluster = json.loads(fake_gcloud.read_text())["clusters"]["my-proj/us-east5-b/ml"]
    assert cluster["addonsConfig"]["rayOperatorConfig"]["enabled"] is True
    pools = cluster["nodePools"]
    assert {p["config"]["workloadMetadataConfig"]["mode"] for p in pools.values()} == {
        "GKE_METADATA"
    }
    # Asked in the other order, gcloud refuses: the fake holds gcloud's rule.
    _a_cluster_made_elsewhere(fake_gcloud, "--machine-type=n1-standard-16")
    gke = fake_gcloud_module.Gcloud(json.loads(fake_gcloud.read_text()))
    with pytest.raises(fake_gcloud_module.Refused, match="Workload Identity is enabled"):
        gke.run(shlex.split(fix.replace("POOL", "default-pool"))[1:])


def test_a_new_cluster_the_channel_would_make_too_old_is_refused_before_it_bills(
    fake_gcloud, capsys
):
    """No cluster yet, and GKE's regular channel would make it at 1.32 where flex-start needs
    1.33.0-gke.1712000: gke up (and the printed plan) stop before `clusters create`, with how
    to make one new enough; where the channel's default is new enough, the cluster is made."""
    state = {"gke_version": "1.32.4-gke.1106006"}  # what the channel gives a new cluster here
    fake_gcloud.write_text(json.dumps(state))
    flex = ("--capacity=flex-start",)
    assert _gke("up", "v6e-16.yaml", *flex) == 2
    err = capsys.readouterr().err
    assert "a new cluster on GKE's regular channel gets GKE 1.33.0-gke.1712000 or later" in err
    assert "--release-channel=rapid --cluster-version=VERSION" in err, err
    ran = _ran(fake_gcloud)
    assert not [c for c in ran if c[:3] == ["container", "clusters", "create"]], ran
    assert json.loads(fake_gcloud.read_text())["clusters"] == {}  # nothing bills
    script = _plan(capsys, "v6e-16.yaml", *TUTORIAL, *flex, "--helm", "helm")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert done.returncode == 1 and "regular channel gets GKE 1.33.0" in done.stderr, done.stderr
    state = json.loads(fake_gcloud.read_text())
    state["gke_version"] = "1.33.5-gke.1000000"
    fake_gcloud.write_text(json.dumps(state))
    assert _gke("up", "v6e-16.yaml", *flex) == 0, capsys.readouterr().err
    assert "ml" in str(json.loads(fake_gcloud.read_text())["clusters"])


def test_a_cluster_older_than_the_slices_need_is_refused_before_anything_changes(
    fake_gcloud, capsys
):
    """GKE's flex-start needs 1.33.0-gke.1712000 or later: a cluster at 1.32 stops gke up (and
    the printed plan) with the upgrade command, before any add-on, pool or image."""
    _a_cluster_made_elsewhere(
        fake_gcloud, "--workload-pool=my-proj.svc.id.goog", "--cluster-version=1.32.4-gke.1106006"
    )
    flex = ("--capacity=flex-start", "--migrate-node-metadata")
    assert _gke("up", "v6e-16.yaml", *flex) == 2
    err = capsys.readouterr().err
    assert "the cluster runs GKE 1.33.0-gke.1712000 or later (TPUs on flex-start need it)" in err
    assert "--master --cluster-version=1.33.0-gke.1712000" in err
    assert [r[:2] for r in _ran(fake_gcloud)] == [["services", "enable"]] * 6  # GKE's was on
    script = _plan(capsys, "v6e-16.yaml", *TUTORIAL, *flex, "--helm", "helm")
    ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert ran.returncode == 1 and "1.33.0-gke.1712000 or later" in ran.stderr, ran.stderr
    # The same cluster, new enough (1.33.0-gke.1712000 itself, compared number by number).
    state = json.loads(fake_gcloud.read_text())
    state["clusters"]["my-proj/us-east5-b/ml"]["currentMasterVersion"] = "1.33.0-gke.1712000"
    fake_gcloud.write_text(json.dumps(state))
    assert _gke("up", "v6e-16.yaml", *flex) == 0


def test_gke_up_stops_at_the_first_failure_and_names_it(fake_gcloud, capfd):
    fake_gcloud.write_text(json.dumps({"quota": {"tpu_chips": 16}}))  # one v6e-16 slice
    assert _gke("up", "v6e-16-x2.yaml") != 0
    err = capfd.readouterr().err  # which step failed, then gcloud's own message
    assert "node pool tpu-ray-v6e-16-1" in err and "Quota 'TPU chips' exceeded" in err
    ran = [r[:4] for r in _ran(fake_gcloud)]
    assert ran[-2:] == [
        ["container", "node-pools", "create", "tpu-ray-v6e-16-0"],
        ["container", "node-pools", "create", "tpu-ray-v6e-16-1"],  # the one refused: the last
    ]
    assert ["artifacts", "repositories", "create"] in [r[:3] for r in ran]  # made before it


@pytest.mark.parametrize(
    ("made_otherwise", "shown"),
    [
        ({"config": {"machineType": "ct5p-hightpu-4t"}}, "ct5p-hightpu-4t\t4x4\tFalse"),
        ({"config": {"spot": True}}, "ct6e-standard-4t\t4x4\tTrue"),  # Spot, not on demand
        ({"placementPolicy": {"tpuTopology": "2x4"}}, "ct6e-standard-4t\t2x4\tFalse"),
    ],
)
def test_a_pool_of_the_same_name_made_otherwise_is_refused(
    fake_gcloud, capsys, made_otherwise, shown
):
    """The release's v6e-16 pool name, taken by a pool of other hosts, another topology or
    capacity (an older release of the same name, a rerun with another --capacity): skipping it
    as done would leave the pods Pending for ever. gke up and the printed plan both stop at
    it, name what is there and how to fix it, and make nothing."""
    assert _gke("up", "v6e-16.yaml") == 0
    state = json.loads(fake_gcloud.read_text())
    pool = state["clusters"]["my-proj/us-east5-b/ml"]["nodePools"]["tpu-ray-v6e-16-0"]
    for key, fields in made_otherwise.items():
        pool[key].update(fields)
    fake_gcloud.write_text(json.dumps(state))
    capsys.readouterr()
    assert _gke("up", "v6e-16.yaml") == 2
    err = capsys.readouterr().err
    wanted = "machine ct6e-standard-4t, topology 4x4, on demand"
    assert "node pool tpu-ray-v6e-16-0" in err and f"not {wanted})" in err, err
    assert " ".join(shown.split()) in err
    assert "gcloud container node-pools delete tpu-ray-v6e-16-0" in err
    script = _plan(capsys, "v6e-16.yaml", *TUTORIAL, "--helm", "helm")  # the fake's registry
    ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert ran.returncode == 1 and f"exists, not as {wanted}" in ran.stderr, ran.stderr


def test_a_pool_bound_to_another_reservation_of_a_longer_name_is_refused(fake_gcloud, capsys):
    """gcloud's `values:my-res` filter is a word match, true of a pool bound to `my-res-2`
    too (the FAKE matches as gcloud does): skipped as done, the pods would wait for a
    reservation no node of it consumes. The reservation is compared whole."""
    reserved = ("--capacity=reservation", "--reservation=my-res")
    assert _gke("up", "v6e-16.yaml", *reserved) == 0
    capsys.readouterr()
    assert _gke("up", "v6e-16.yaml", *reserved) == 0  # the same pool: done, skipped
    assert "node pool tpu-ray-v6e-16-0" in capsys.readouterr().out
    state = json.loads(fake_gcloud.read_text())
    pool = state["clusters"]["my-proj/us-east5-b/ml"]["nodePools"]["tpu-ray-v6e-16-0"]
    pool["config"]["reservationAffinity"]["values"] = ["my-res-2"]
    fake_gcloud.write_text(json.dumps(state))
    assert _gke("up", "v6e-16.yaml", *reserved) == 2
    err = capsys.readouterr().err
    assert "node pool tpu-ray-v6e-16-0" in err and "reservation my-res" in err, err
    script = _plan(capsys, "v6e-16.yaml", *TUTORIAL, *reserved, "--helm", "helm")
    ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert ran.returncode == 1 and "exists, not as" in ran.stderr, ran.stderr


def test_a_zone_without_the_slices_generation_is_refused_before_anything_is_made(
    fake_gcloud, capfd
):
    """Cloud TPU offers v4, v5e and Ironwood in none of us-east5-b's racks: the cluster and its
    CPU pool would bill and the TPU pool fail last. The plan refuses first, with the zones that
    do (and --allow-zone for one added since); the FAKE refuses such a pool as GKE would."""
    for values, zones in (
        ("v4-16.yaml", "us-central2-b"),
        ("v5e-32-saxml.yaml", "us-central1-a, us-south1-a"),
        ("tpu7x-16.yaml", "us-central1-c"),
    ):
        assert _gke("plan", values) == 2
        err = capfd.readouterr().err
        assert "is not offered in us-east5-b" in err and zones in err, err
        assert "--allow-zone us-east5-b" in err
    assert not fake_gcloud.exists() or not _ran(fake_gcloud)
    # Told the zone is offered now, the plan goes on; the FAKE, like GKE, still refuses it.
    assert _gke("up", "v4-16.yaml", "--allow-zone", "us-east5-b") != 0
    assert "is not available in zone us-east5-b" in capfd.readouterr().err
    assert [r[:3] for r in _ran(fake_gcloud)][-1] == ["container", "node-pools", "create"]


def test_gke_up_without_gcloud_says_so_and_prints_the_plan(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no gcloud here
    assert _gke("up", "v6e-16.yaml", helm_bin=str(helm(3))) == 1
    captured = capsys.readouterr()
    assert "gcloud not installed" in captured.err and "--tpu-topology=4x4" in captured.out


def test_gke_up_refuses_an_unfinished_plan(fake_gcloud, capsys):
    values = str(REPO / "values" / "v6e-16.yaml")
    args = ["gke", "up", "--values", values, "--chart", str(CHART), "--helm", str(helm(3))]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "CLUSTER_NAME" in err and "--project" in err
    calls = json.loads(fake_gcloud.read_text())["calls"] if fake_gcloud.exists() else []
    assert all(c[1:3] == ["config", "get-value"] for c in calls), calls  # read, nothing ran


def test_gke_down_asks_before_it_deletes_and_keeps_the_bucket(fake_gcloud, capsys, monkeypatch):
    assert _gke("up", "v6e-16.yaml") == 0
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no terminal: refuse without --yes
    assert _gke("down", "v6e-16.yaml") == 2
    out = capsys.readouterr()
    assert "node pool tpu-ray-v6e-16-0" in out.out and "--yes" in out.err
    assert "gs://my-ckpts and its checkpoints stay" in out.out
    # What stays is said, and nothing is listed as deleted that is not.
    assert "IAM bindings that let the release's service accounts use gs://my-ckpts" in out.out
    assert "  - kubectl's credentials" not in out.out
    state = json.loads(fake_gcloud.read_text())
    assert state["clusters"] and state["repositories"]  # nothing deleted yet

    assert _gke("down", "v6e-16.yaml", "--yes") == 0
    state = json.loads(fake_gcloud.read_text())
    assert state["clusters"] == {} and state["repositories"] == {} and state["images"] == {}
    # The checkpoints stay, and the builds' staged sources with the build account, said.
    assert sorted(state["buckets"]) == ["my-ckpts", "my-proj_cloudbuild"]
    assert state["service_accounts"] == ["tpu-launcher-build@my-proj.iam.gserviceaccount.com"]
    said = "`gcloud iam service-accounts delete tpu-launcher-build@my-proj.iam.gserviceaccount.com"
    assert said in out.out


def test_gke_down_leaves_a_cluster_it_did_not_make(fake_gcloud, capsys):
    _a_cluster_made_elsewhere(fake_gcloud, "--workload-pool=my-proj.svc.id.goog")
    assert _gke("up", "v6e-16.yaml", "--migrate-node-metadata") == 0
    assert _gke("down", "v6e-16.yaml", "--yes") == 0
    pools = json.loads(fake_gcloud.read_text())["clusters"]["my-proj/us-east5-b/ml"]["nodePools"]
    assert list(pools) == ["default-pool"]  # ours gone, the cluster and its own pool kept


def test_gke_down_of_one_release_leaves_the_cluster_another_release_is_in(fake_gcloud, capsys):
    """The two releases of docs/serving.md in one cluster: the training one goes, the serving
    one stays running with its pool, the cluster and the image repository, and what holds them
    is named; the last release's `gke down` takes the cluster."""
    assert _gke("up", "v6e-16.yaml") == 0
    assert _gke("up", "v6e-8-vllm.yaml", "--release", "serve") == 0
    capsys.readouterr()
    assert _gke("down", "v6e-16.yaml", "--yes") == 0
    out = capsys.readouterr().out
    state = json.loads(fake_gcloud.read_text())
    pools = state["clusters"]["my-proj/us-east5-b/ml"]["nodePools"]
    assert not [p for p in pools if p.startswith("tpu-")] and "default-pool" in pools
    serving = sorted(p for p in pools if p.startswith("serve-"))
    assert serving and state["repositories"]
    assert (
        f"kept, these node pools of others are in it (`gke down` of their release deletes "
        f"them; then run it again): {', '.join(serving)}" in out
    )
    assert _gke("down", "v6e-8-vllm.yaml", "--release", "serve", "--yes") == 0
    state = json.loads(fake_gcloud.read_text())
    # The repository the first kept goes with the last, though serving pulls no launcher image.
    assert state["clusters"] == {} and state["repositories"] == {}


def test_gke_up_and_down_make_and_remove_ironwoods_workload_policy(fake_gcloud, capsys):
    zone = "--location=us-central1-c"  # a zone that offers Ironwood
    assert _gke("up", "tpu7x-16.yaml", zone) == 0
    state = json.loads(fake_gcloud.read_text())
    (key,) = state["policies"]
    assert state["policies"][key]["acceleratorTopology"] == "2x2x2"
    pools = state["clusters"]["my-proj/us-central1-c/ml"]["nodePools"]
    assert pools["tpu-ray-tpu7x-16-0"]["placementPolicy"]["policyName"] == key.rsplit("/", 1)[1]
    assert _gke("up", "tpu7x-16.yaml", zone) == 0  # a second run skips what exists
    assert _gke("down", "tpu7x-16.yaml", zone, "--yes") == 0
    assert json.loads(fake_gcloud.read_text())["policies"] == {}  # after its pool, not before


def test_gke_down_keeps_what_the_regions_other_clusters_share(fake_gcloud, capsys):
    """The image repository and Ironwood's workload policy are the region's, not the cluster's:
    `gke down` of one cluster deletes its own, and keeps them while GKE lists another cluster of
    the project in the region, saying which and how to delete them; the region's last
    cluster's `gke down` takes them."""
    ironwood = ("--location=us-central1-c",)  # a zone that offers Ironwood
    beside = ("--location=us-central1-b", "--cluster=ml2")  # v6e, the same region
    assert _gke("up", "tpu7x-16.yaml", *ironwood) == 0
    assert _gke("up", "v6e-16.yaml", *beside) == 0
    capsys.readouterr()
    assert _gke("down", "tpu7x-16.yaml", *ironwood, "--yes") == 0
    out = capsys.readouterr().out
    state = json.loads(fake_gcloud.read_text())
    assert list(state["clusters"]) == ["my-proj/us-central1-b/ml2"]  # ml is gone
    assert state["repositories"] and state["policies"], out
    kept = "kept, the pods of clusters in us-central1 may pull from it (`gcloud artifacts "
    assert kept in out and "ml2\tus-central1-b" not in out and "ml2, us-central1-b" in out, out
    assert "kept, clusters in us-central1 may place pools with it" in out
    assert _gke("down", "v6e-16.yaml", *beside, "--yes") == 0
    state = json.loads(fake_gcloud.read_text())
    assert state["clusters"] == {} and state["repositories"] == {}
    # The policy ml's release made, kept while ml2 stood, goes with that release's next down.
    assert state["policies"]
    assert _gke("down", "tpu7x-16.yaml", *ironwood, "--yes") == 0
    assert json.loads(fake_gcloud.read_text())["policies"] == {}


def test_an_ai_zone_takes_the_tpu_pools_and_the_rest_goes_to_its_parent_zone(fake_gcloud, capfd):
    """Compute Engine's "AI zones": standard zones for what is not ML, and an AI zone seen only
    by a project whose AI zone visibility is on. A cluster located in an AI zone is refused with
    the flags that place it; with the TPU pools' zone an AI zone, the visibility is checked
    before anything is made, and the cluster's own nodes and the CPU pool go to its parent
    zone (us-central1-a for us-central1-ai1a), the TPU pools to the AI zone."""
    assert _gke("up", "v6e-16.yaml", "--location=us-central1-ai1a") == 2
    err = capfd.readouterr().err
    assert "us-central1-ai1a is an AI zone" in err, err
    assert "--location us-central1 (or us-central1-a, its parent zone) with --node-zone" in err
    assert _ran(fake_gcloud) == []
    ai = ("--location=us-central1", "--node-zone=us-central1-ai1a")
    assert _gke("up", "v6e-16.yaml", *ai) == 2
    err = capfd.readouterr().err
    assert "the project sees AI zone us-central1-ai1a" in err and "AI zone visibility" in err
    assert not [c for c in _ran(fake_gcloud) if c[0] == "container"]  # nothing bills
    state = json.loads(fake_gcloud.read_text())
    state["ai_zones_visible"] = True
    fake_gcloud.write_text(json.dumps(state))
    assert _gke("up", "v6e-16.yaml", *ai) == 0, capfd.readouterr().err
    (create,) = [c for c in _ran(fake_gcloud) if c[:3] == ["container", "clusters", "create"]]
    assert "--node-locations=us-central1-a" in create, create
    pools = json.loads(fake_gcloud.read_text())["clusters"]["my-proj/us-central1/ml"]["nodePools"]
    zones = {name: pool.get("zone") for name, pool in pools.items() if name != "default-pool"}
    assert zones == {"tpu-cpu": "us-central1-a", "tpu-ray-v6e-16-0": "us-central1-ai1a"}, zones


def test_an_existing_service_account_is_the_one_bound(capsys, tmp_path):
    existing = tmp_path / "existing-sa.yaml"
    existing.write_text("ray:\n  serviceAccount:\n    create: false\n    name: trainer-ksa\n")
    script = _plan(capsys, "v6e-16.yaml", "--values", str(existing))
    assert script.count("/subject/ns/default/sa/trainer-ksa") == 1


@pytest.mark.parametrize("cache_on_bucket", [True, False])
def test_serving_may_only_read_the_bucket_and_training_may_write_it(
    capsys, tmp_path, cache_on_bucket
):
    """One identity per part: vLLM mounts the bucket read-only, so its account gets
    objectViewer, and objectUser only on objects under its compile cache's prefix (an IAM
    condition) when the cache is on the bucket; training's gets objectUser."""
    both = tmp_path / "train-and-serve.yaml"
    both.write_text(
        "serving:\n  engine: vllm\nvllm:\n  model: /data/m\n  apiKey:\n    secretName: k\n"
        f"  compileCache:\n    onBucket: {str(cache_on_bucket).lower()}\n"
    )
    grants = [
        c
        for c in _commands(_plan(capsys, "v6e-16.yaml", "--values", str(both)))
        if c[:4] == ["gcloud", "storage", "buckets", "add-iam-policy-binding"]
        and not c[4].endswith("_cloudbuild")  # the image build's source, not the release's
    ]
    roles = sorted(
        (c[5].rsplit("/", 1)[1], *(w for w in c[6:] if w != "--condition=None")) for c in grants
    )
    bucket = grants[0][4].removeprefix("gs://")  # the plan's (a variable here)
    cache = [
        (
            "tpu-vllm",
            "--role=roles/storage.objectUser",
            "--condition=expression=resource.name.startsWith("
            f'"projects/_/buckets/{bucket}/objects/vllm-xla-cache/"),title=tpu-launcher '
            "vllm-xla-cache",
        )
    ]
    assert roles == [
        ("tpu-ray", "--role=roles/storage.objectUser"),
        *(cache if cache_on_bucket else []),
        ("tpu-vllm", "--role=roles/storage.objectViewer"),
    ]


def test_saxml_which_keeps_its_state_through_gcs_may_write_the_bucket(capsys):
    """Saxml's pods mount no bucket: they name it (GSBUCKET, SAX_ROOT) and write through GCS's
    API, so their own account gets objectUser."""
    grants = [
        c
        for c in _commands(_plan(capsys, "v5e-32-saxml.yaml"))
        if c[:4] == ["gcloud", "storage", "buckets", "add-iam-policy-binding"]
    ]
    assert {c[5].rsplit("/", 1)[1]: c[6] for c in grants} == {
        "tpu-saxml": "--role=roles/storage.objectUser"
    }


def test_values_the_chart_refuses_are_the_users_mistake_named_with_the_fix(capsys, tmp_path):
    """Helm's refusal (the chart's own, or its schema's) is an error of ours: exit 2, each
    value named, not helm's failure and exit 1."""
    common = ["--chart", str(CHART), "--helm", str(helm(3)), "--project=my-proj"]
    for text, said in (
        ("ray:\n  worker:\n    tpu:\n      type: v6e-17\n", 'unknown TPU type "v6e-17"'),
        ("ray:\n  worker:\n    tpu:\n      slices: 0\n", "at '/ray/worker/tpu/slices'"),
    ):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        code = cli.main(
            ["gke", "plan", "-f", str(REPO / "values/v6e-16.yaml"), "-f", str(bad), *common]
        )
        err = capsys.readouterr().err
        assert code == 2, err
        assert "error: values: the chart refuses them:\n  - " in err and said in err, err
        assert "fix: change what is named" in err and "failed (exit" not in err


def test_every_values_file_has_its_expected_pools():
    assert set(POOLS) == {p.name for p in VALUES_FILES}


@pytest.mark.parametrize(
    ("sets", "expected", "absent"),
    [
        (["--capacity=spot"], ["--spot"], ["--reservation-affinity=specific"]),
        (
            ["--reservation=tpu-res-1"],
            ["--reservation-affinity=specific", "--reservation=tpu-res-1", "--num-nodes=4"],
            ["--spot"],
        ),
        # A reservation another project shares: gcloud's full form for the pool.
        (
            ["--reservation=projects/owner-proj/reservations/tpu-res-1"],
            ["--reservation=projects/owner-proj/reservations/tpu-res-1"],
            ["--reservation=tpu-res-1"],
        ),
        # Flex-start: GKE brings the nodes when capacity is free, up to the slice's 4 hosts.
        (
            ["--capacity=flex-start"],
            ["--flex-start", "--enable-autoscaling", "--num-nodes=0", "--total-max-nodes=4"],
            ["--num-nodes=4", "--spot"],
        ),
        ([], ["--num-nodes=4"], ["--spot", "--flex-start", "--reservation-affinity=specific"]),
    ],
)
def test_the_tpu_pool_is_made_of_the_capacity_the_pods_ask_for(
    fake_gcloud, capsys, sets, expected, absent
):
    """The capacity goes into the render (every slice group's value), and the plan reads it back
    from the pods' node selector: the pool GKE makes is the one the pods can land on."""
    (tpu,) = [
        c
        for c in _commands(_plan(capsys, "v6e-16.yaml", *TUTORIAL, *sets))
        if c[1:4] == ["container", "node-pools", "create"] and "--tpu-topology=4x4" in c
    ]
    for flag in expected:
        assert flag in tpu, (flag, tpu)
    for flag in absent:
        assert flag not in tpu, (flag, tpu)


def test_flex_start_under_a_kueue_queue_makes_a_queued_provisioning_pool(capsys, tmp_path):
    """GKE: "To use flex-start with queued provisioning, you have to add the --flex-start and
    --enable-queued-provisioning flags" (the queue's ProvisioningRequest never provisions from a
    pool without it); read back from the workers' gke-queued selector."""
    queued = tmp_path / "queued.yaml"
    queued.write_text("kueue:\n  queueName: team-a\n")

    def tpu_pool(*extra: str) -> list[str]:
        (tpu,) = [
            c
            for c in _commands(_plan(capsys, "v6e-16.yaml", *TUTORIAL, *extra))
            if c[1:4] == ["container", "node-pools", "create"] and "--tpu-topology=4x4" in c
        ]
        return tpu

    assert "--enable-queued-provisioning" not in tpu_pool("--capacity=flex-start")
    pool = tpu_pool("--capacity=flex-start", "--values", str(queued))
    assert {"--flex-start", "--enable-queued-provisioning", "--total-max-nodes=4"} <= set(pool)
    # GKE taints a queued pool's nodes but labels them only as the pool says (Google's
    # cluster-toolkit adds the label by hand): the workers' gke-queued selector needs the label.
    sets = ("ray.worker.tpu.capacity=flex-start", "kueue.queueName=team-a")
    docs = render(REPO / "values" / "v6e-16.yaml", *(a for s in sets for a in ("--set", s)))
    (cluster,) = [d for d in docs if d["kind"] == "RayCluster"]
    selector = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"]
    queued_selector = {k: v for k, v in selector.items() if k.endswith("gke-queued")}
    labels = [f.removeprefix("--node-labels=") for f in pool if f.startswith("--node-labels=")]
    assert queued_selector and labels
    assert set(labels[0].split(",")) >= {f"{k}={v}" for k, v in queued_selector.items()}
    assert "--node-labels" not in " ".join(tpu_pool("--capacity=flex-start"))


def test_pools_of_slices_that_come_with_a_job_scale_from_zero(capsys, tmp_path):
    """A RayJob's cluster asks for the slices a standing RayCluster would, but only while its
    job runs: the same pools, made empty and autoscaled up to the slice's hosts, so GKE
    removes the TPU VMs once the job's pods are gone (a fixed pool bills with no pod on it)."""
    job = tmp_path / "v6e-16-job.yaml"
    job.write_text(
        (REPO / "values" / "v6e-16.yaml").read_text()
        + "\n".join(["", "  job:", "    enabled: true", "    args: [base.yml, run_name=r]", ""])
    )

    def pools(values: str, *sets: str) -> dict[str, list[str]]:
        return {
            c[4]: c[5:]
            for c in _commands(_plan(capsys, values, *TUTORIAL, *sets))
            if c[1:4] == ["container", "node-pools", "create"]
        }

    standing, batch = pools("v6e-16.yaml"), pools(str(job))
    assert standing.keys() == batch.keys()
    (tpu,) = [name for name, flags in standing.items() if "--tpu-topology=4x4" in flags]
    from_zero = {"--enable-autoscaling", "--num-nodes=0", "--total-min-nodes=0"}
    assert from_zero | {"--total-max-nodes=4"} <= set(batch[tpu]), batch[tpu]
    assert "--num-nodes=4" not in batch[tpu]
    assert "--num-nodes=4" in standing[tpu] and not from_zero & set(standing[tpu])
    # Everything else is the same pool; flex-start's flags are not given twice.
    assert set(batch[tpu]) - set(standing[tpu]) == from_zero | {"--total-max-nodes=4"}
    flex = pools(str(job), "--capacity=flex-start")[tpu]
    assert len(flex) == len(set(flex)) and "--enable-autoscaling" in flex
    # A standing release that gives idle slices back: the same pool as the RayJob's.
    idle = pools("v6e-16.yaml", "--set", "ray.worker.tpu.releaseIdleAfterSeconds=1800")
    assert idle[tpu] == batch[tpu]
    # The CPU pool of the head and the submitter stays as it was.
    for name in standing.keys() - {tpu}:
        assert batch[name] == standing[name]


def _queue(capsys, *flags: str) -> list[dict]:
    import yaml

    args = ["gke", "queue", "--values", str(REPO / "values" / "v6e-16-x2.yaml")]
    assert cli.main([*args, "--chart", str(CHART), "--helm", str(helm(3)), *TUTORIAL, *flags]) == 0
    return list(yaml.safe_load_all(capsys.readouterr().out))


def test_the_queue_holds_whole_slices_of_the_shape_and_capacity_the_pods_ask_for(capsys):
    """gke queue: a flavor with the pods' own node labels, TPU quota in whole slices (2 x 16
    chips by default, the release's; --quota-slices 1 holds one), Spot's toleration; on
    flex-start GKE's queued provisioning, for the TPU pod set only (GKE takes one per request)."""
    by_kind = {
        (o["kind"], o["metadata"]["name"]): o
        for o in _queue(capsys, "--queue", "team-a", "--capacity=spot")
    }
    flavor = by_kind[("ResourceFlavor", "tpu-v6e-4x4-spot")]["spec"]
    assert flavor["nodeLabels"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
        "cloud.google.com/gke-spot": "true",
    }
    assert [t["key"] for t in flavor["tolerations"]] == ["cloud.google.com/gke-spot"]
    (_, tpu) = by_kind[("ClusterQueue", "team-a-tpu")]["spec"]["resourceGroups"]
    assert tpu["flavors"][0]["resources"] == [{"name": "google.com/tpu", "nominalQuota": 32}]
    assert by_kind[("LocalQueue", "team-a")]["spec"] == {"clusterQueue": "team-a-tpu"}
    assert not [k for k in by_kind if k[0] == "AdmissionCheck"]

    objects = _queue(capsys, "--queue", "q", "--capacity=flex-start", "--quota-slices", "1")
    by_kind = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    config = by_kind[("ProvisioningRequestConfig", "q-flex-start")]["spec"]
    assert config == {
        "provisioningClassName": "queued-provisioning.gke.io",
        "managedResources": ["google.com/tpu"],
    }
    queue = by_kind[("ClusterQueue", "q-tpu")]["spec"]
    assert queue["admissionChecksStrategy"] == {"admissionChecks": [{"name": "q-flex-start"}]}
    assert {o["apiVersion"] for o in objects} == {"kueue.x-k8s.io/v1beta2"}  # Kueue's current
    assert queue["resourceGroups"][1]["flavors"][0]["resources"][0]["nominalQuota"] == 16


def test_a_queue_needs_its_name(capsys):
    args = ["gke", "queue", "--values", str(REPO / "values" / "v6e-16.yaml"), "--chart", str(CHART)]
    assert cli.main([*args, "--helm", str(helm(3)), *TUTORIAL]) == 2
    assert "kueue.queueName" in capsys.readouterr().err


def test_a_spot_pool_gives_its_pods_the_grace_period_they_save_in(
    fake_gcloud, capfd, monkeypatch, tmp_path
):
    """GKE gives a Spot pool's pods 15 s of a reclaim's 30 s notice unless the pool extends its
    node shutdown, which GKE's API takes as 0, 30 or 120 s (NodeKubeletConfig, read from the
    discovery document by the FAKE gcloud), 15 of them the system pods'. The workers' grace
    period (the chart's 30 s) needs the 120 s shutdown, written to the pool's system
    configuration; the FAKE keeps it and says what the pods then get (up to 105 s). A grace
    period no Spot pool can give is refused with the fix."""
    monkeypatch.chdir(tmp_path)  # the system configuration is written under .local/gke
    assert _gke("up", "v6e-16.yaml", "--capacity=spot") == 0
    state = json.loads(fake_gcloud.read_text())
    pools = state["clusters"]["my-proj/us-east5-b/ml"]["nodePools"]
    assert fake_gcloud_module.pod_shutdown_seconds(pools["tpu-ray-v6e-16-0"]) == 105
    assert fake_gcloud_module.pod_shutdown_seconds(pools["tpu-cpu"]) == 15  # not Spot: untouched
    capfd.readouterr()

    longer = ("--capacity=spot", "--set", "ray.worker.terminationGracePeriodSeconds=60")
    script = _plan(capfd, "v6e-16.yaml", *TUTORIAL, *longer)
    assert "shutdownGracePeriodSeconds: 120" in script
    assert "the cluster runs GKE 1.35.0-gke.1171000 or later" in script
    # The pool made for 30 s gives 60 s too: the rerun keeps it.
    assert _gke("up", "v6e-16.yaml", *longer) == 0
    capfd.readouterr()

    too_long = ("--capacity=spot", "--set", "ray.worker.terminationGracePeriodSeconds=110")
    assert _gke("plan", "v6e-16.yaml", *too_long) == 2
    err = capfd.readouterr().err
    assert "GKE gives pods at most 105s" in err
    assert "--set ray.worker.terminationGracePeriodSeconds=105" in err


@pytest.mark.parametrize("grace", [16, 30, 60, 105])
def test_a_spot_pools_node_shutdown_is_one_gkes_api_takes(
    fake_gcloud, grace, capfd, monkeypatch, tmp_path
):
    """Every kubeletConfig value a Spot plan writes satisfies the rules GKE's API publishes for
    it (its discovery document: "Allowed values: 0, 30, 120.", "Range: [0, 120]." and at most
    the shutdown); the plan of 1fca7da wrote the grace period plus 15 (45 for 30 s), which GKE
    refuses."""
    import yaml

    from tests.support import gke_discovery

    monkeypatch.chdir(tmp_path)
    sets = ("--capacity=spot", "--set", f"ray.worker.terminationGracePeriodSeconds={grace}")
    script = _plan(capfd, "v6e-16.yaml", *TUTORIAL, *sets)
    written = re.search(r"kubeletConfig:\n(?:  .*\n)+", script)
    assert written, script
    kubelet = yaml.safe_load(written[0])["kubeletConfig"]
    schema = "NodeKubeletConfig"
    shutdown = kubelet["shutdownGracePeriodSeconds"]
    allowed = gke_discovery.allowed_values(schema, "shutdownGracePeriodSeconds")
    assert allowed == (0, 30, 120), gke_discovery.revision()  # what the test reads, as read
    assert shutdown in allowed, (shutdown, gke_discovery.revision())
    low, high = gke_discovery.value_range(schema, "shutdownGracePeriodCriticalPodsSeconds")
    assert low <= kubelet["shutdownGracePeriodCriticalPodsSeconds"] <= min(high, shutdown)
    assert shutdown - kubelet["shutdownGracePeriodCriticalPodsSeconds"] >= grace
    for name in kubelet:
        assert gke_discovery.field(schema, name)["type"] == "integer"
    print(f"GKE's discovery document, revision {gke_discovery.revision()}")


def test_a_shared_reservation_is_selected_by_its_name_and_its_owner(capsys):
    """GKE labels a node of a reservation another project shares with the reservation's name
    and its owner (cloud.google.com/reservation-project): the pods select both, the pool is made
    with gcloud's projects/OWNER/reservations/NAME, and the queue's flavor names both."""
    shared = ("--set", "ray.worker.tpu.capacity=reservation")
    owned = ("--set", "ray.worker.tpu.reservation=projects/owner-proj/reservations/tpu-res-1")
    docs = render(REPO / "values" / "v6e-16.yaml", *shared, *owned)
    (cluster,) = [d for d in docs if d["kind"] == "RayCluster"]
    selector = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"]
    assert selector["cloud.google.com/reservation-name"] == "tpu-res-1"
    assert selector["cloud.google.com/reservation-project"] == "owner-proj"
    assert selector["cloud.google.com/reservation-affinity"] == "specific"
    queue = _queue(capsys, "--queue", "q", *shared, *owned)
    (flavor,) = [o for o in queue if o["metadata"]["name"] == "tpu-v6e-4x4-reservation"]
    assert flavor["spec"]["nodeLabels"]["cloud.google.com/reservation-project"] == "owner-proj"
    # A reservation in no form GKE takes is the chart's refusal, at its key.
    err = refused(*shared, "--set", "ray.worker.tpu.reservation=projects/p/tpu-res-1")
    assert "reservation" in err, err


def test_an_ai_zone_is_a_zone_of_its_region(capsys):
    """Cloud TPU lists AI zones beside standard ones (us-central1-ai1a for tpu7x and v6e);
    Compute Engine's "About AI zones": an AI zone belongs to its region, us-central1. What is
    regional (the image repository, the bucket, Ironwood's workload policy) goes there; the
    TPU pools go in the AI zone itself, the CPU pool and the cluster's own node to its parent
    zone."""
    where = (
        "--project=my-proj",
        "--cluster=ml",
        "--location=us-central1",
        "--node-zone=us-central1-ai1a",
        "--bucket=my-ckpts",
    )
    script = _plan(capsys, "tpu7x-16.yaml", *where)
    assert "NODE_ZONE" not in script
    named = {tuple(c[1:4]): c for c in _commands(script)}
    assert "--location=us-central1" in named["artifacts", "repositories", "create"]
    assert "--location=us-central1" in named["storage", "buckets", "create"]
    assert "--region=us-central1" in named["compute", "resource-policies", "create"]
    pools = {c[4]: c for c in _commands(script) if c[1:4] == ["container", "node-pools", "create"]}
    tpu = [c for name, c in pools.items() if name.startswith("tpu-ray")]
    assert tpu and all("--node-locations=us-central1-ai1a" in p for p in tpu), pools
    assert "--node-locations=us-central1-a" in pools["tpu-cpu"]
    cluster = named["container", "clusters", "create"]
    assert "--location=us-central1" in cluster and "--node-locations=us-central1-a" in cluster


def test_flex_start_is_refused_in_a_zone_that_offers_the_generation_only_on_demand(capsys):
    """GKE's flex-start page lists fewer zones per generation than Cloud TPU's zones page: v6e
    on flex-start in asia-northeast1-b, us-east5-a and us-east5-b, not us-east1-d, where v6e
    is on demand. The plan refuses before anything is made, naming the zones that offer it."""
    where = ("--project=my-proj", "--cluster=ml", "--location=us-east1-d", "--bucket=my-ckpts")
    _plan(capsys, "v6e-16.yaml", *where)  # on demand: offered there
    args = ["gke", "plan", "--values", str(REPO / "values" / "v6e-16.yaml"), "--chart", str(CHART)]
    assert cli.main([*args, "--helm", str(helm(3)), *where, "--capacity=flex-start"]) == 2
    err = capsys.readouterr().err
    assert "is not offered on flex-start in us-east1-d" in err, err
    assert "asia-northeast1-b, us-east5-a, us-east5-b" in err and "About flex-start" in err
    # A zone GKE has added since is the user's to name.
    _plan(capsys, "v6e-16.yaml", *where, "--capacity=flex-start", "--allow-zone=us-east1-d")


def test_gke_up_stops_before_any_step_where_gcloud_lacks_what_the_plan_uses(
    fake_gcloud, capfd, monkeypatch, tmp_path
):
    """A Spot pool's node shutdown fields are newer than some gclouds (528.0.0's loader refuses
    them), which would refuse them at the TPU pool's step, after the cluster bills: gke up asks
    the installed gcloud's own loader first (the pool's step, its requests sent nowhere) and
    stops with the update command. The FAKE gcloud plays an older one here (`gcloud_unknown`);
    the real one's loader: the next test."""
    monkeypatch.chdir(tmp_path)
    older = ["shutdownGracePeriodSeconds", "shutdownGracePeriodCriticalPodsSeconds"]
    fake_gcloud.write_text(json.dumps({"gcloud_unknown": older}))
    assert _gke("up", "v6e-16.yaml", "--capacity=spot") == 2
    err = capfd.readouterr().err
    assert "does not know shutdownGracePeriodCriticalPodsSeconds, shutdownGracePeriodSeconds" in err
    assert "gcloud components update" in err
    assert _ran(fake_gcloud) == []  # nothing made
    (asked,) = json.loads(fake_gcloud.read_text())["loader_checks"]  # the TPU pool's step
    assert asked[1:4] == ["container", "node-pools", "create"], asked
    # Without the fields (on demand), the same gcloud is enough.
    assert _gke("up", "v6e-16.yaml") == 0


def test_gke_plan_refuses_as_gke_up_does_and_its_script_asks_the_gcloud_that_runs_it(
    fake_gcloud, capfd, monkeypatch, tmp_path
):
    """`gke plan` refuses where gke up would (the installed gcloud's loader refuses a Spot pool's
    shutdown fields); a plan printed where gcloud takes them, run where it does not (a CI
    runner's older gcloud), stops at its own check before any step, naming the fields."""
    monkeypatch.chdir(tmp_path)
    older = ["shutdownGracePeriodSeconds", "shutdownGracePeriodCriticalPodsSeconds"]
    fake_gcloud.write_text(json.dumps({"gcloud_unknown": older}))
    assert _gke("plan", "v6e-16.yaml", "--capacity=spot") == 2
    out, err = capfd.readouterr()
    assert out == "" and "does not know shutdownGracePeriodCriticalPodsSeconds" in err, err
    fake_gcloud.write_text(json.dumps({}))  # a gcloud that takes them prints the plan
    assert _gke("plan", "v6e-16.yaml", "--capacity=spot") == 0
    script = capfd.readouterr().out
    fake_gcloud.write_text(json.dumps({"gcloud_unknown": older}))  # the runner's gcloud
    ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert ran.returncode == 1, ran.stderr
    assert "unknown fields: " in ran.stderr and "gcloud components update" in ran.stderr
    assert _ran(fake_gcloud) == [] and json.loads(fake_gcloud.read_text())["loader_checks"]
    # The same script where the runner's gcloud takes them runs through.
    fake_gcloud.write_text(json.dumps({}))
    ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert any(c[:3] == ["container", "node-pools", "create"] for c in _ran(fake_gcloud))


def test_the_gcloud_check_asks_the_installed_gclouds_own_loader():
    """The real gcloud, offline (its configuration the check's own, its requests sent where
    nothing listens): the Spot plan's TPU pool step, run with its system configuration, is
    refused by gcloud 528.0.0's loader for exactly the shutdown fields; the same step with
    older kubelet fields only is taken (it ends in the refused connection, nothing refused)."""
    import dataclasses

    from launcher.client.gke import commands as gke_commands
    from launcher.client.gke.gcloud_check import NEWER, refused_fields, script_guard
    from launcher.client.gke.steps import Plan
    from tests.support import installed_gcloud

    root = installed_gcloud.required()
    args = ["gke", "plan", "--values", str(REPO / "values" / "v6e-16.yaml"), "--chart", str(CHART)]
    args += ["--helm", str(helm(3)), "--project=p", "--cluster=c", "--bucket=my-ckpts"]
    ns = cli._parser().parse_args([*args, "--location=us-east5-b", "--capacity=spot"])
    plan = gke_commands._up_plan(ns, *gke_commands._read_release(ns))
    assert any(s.writes and "shutdownGracePeriodSeconds" in s.writes[1] for s in plan.steps)
    lacks = refused_fields(plan)
    print(f"gcloud {installed_gcloud.version(root)} refuses {lacks}")
    if installed_gcloud.version(root) == "528.0.0":
        assert lacks == sorted(NEWER)
    older = "kubeletConfig:\n  podPidsLimit: 4096\n  cpuManagerPolicy: static\n"
    steps = [dataclasses.replace(s, writes=(s.writes[0], older)) if s.writes else s
             for s in plan.steps]  # fmt: skip
    assert refused_fields(Plan(steps)) == []

    # The printed script's own check, run by bash with the same gcloud: refused before any
    # step, the fields named as the loader names them; with the older fields, it passes.
    def guard(of: Plan) -> subprocess.CompletedProcess:
        text = "\n".join(["set -euo pipefail", *script_guard(of)])
        return subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=120)

    taken = guard(Plan(steps))
    assert taken.returncode == 0, taken.stderr
    if installed_gcloud.version(root) == "528.0.0":
        refused = guard(plan)
        assert refused.returncode == 1, refused.stderr
        assert "unknown fields: ['shutdownGracePeriodCriticalPodsSeconds'" in refused.stderr
