"""Rules, not cases: each kind of mistake refused on every part it applies to, naming the key, with
a legitimate neighbour of each still rendering (charts/tpu-stack/templates/_refusals.tpl says each
rule once, with its source):

- a secret only by reference: every part's env, every argument list the chart hands on;
- the rendered pods: a mountPath twice in a container (the API server refuses the pod), an env
  name twice (the kubelet keeps the last, silently), on every pod template of every part;
- how the TPUs are obtained is one value: no capacity label beside it in a node selector."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from harness.helm import BUCKET, CHART, refused, render, run_helm
from harness.paths import REPO

pytestmark = pytest.mark.chart

VLLM = ["serving.engine=vllm", "vllm.model=/data/m", "vllm.apiKey.secretName=k"]
SAXML = ["serving.engine=saxml", "saxml.stateBucket=my-sax"]
RAYJOB = ["ray.job.enabled=true", "ray.job.args={base.yml,run_name=r}"]
HF = "hf_" + "aB3" * 12  # the form of a Hugging Face token, not one


def _sets(*sets: str) -> list[str]:
    return [a for s in sets for a in ("--set", s)]


def _refused_with(key: str, says: str, *sets: str) -> None:
    err = refused(*BUCKET, *_sets(*sets))
    assert f"{key}: " in err or f"{key}[" in err, err
    assert says in err, err


# Every env list of every part: a literal value whose name or form gives a token away.
ENV_KEYS = {"ray.head.env": [], "ray.worker.env": [], "vllm.env": VLLM}


@pytest.mark.parametrize("env_key", ENV_KEYS)
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HF_TOKEN", "x"),  # named: whatever the value
        ("WANDB_API_KEY", "0123"),
        ("AWS_SECRET_ACCESS_KEY", "abc"),
        ("DB_PASSWORD", "pw"),
        ("MY_SETTING", HF),  # the form: whatever the name
        ("NOTE", "sk-" + "x" * 24),
    ],
)
def test_a_secret_in_any_parts_env_is_refused_with_the_secret_based_key(env_key, name, value):
    sets = [*ENV_KEYS[env_key], f"{env_key}[0].name={name}", f"{env_key}[0].value={value}"]
    err = refused(*BUCKET, *_sets(*sets[:-1]), "--set-string", sets[-1])
    assert f"{env_key}[0]: {name} is given as a literal value, a secret in plain values" in err
    if name == "HF_TOKEN" and env_key.startswith("ray."):
        assert "--set ray.hfToken.secretName=<Secret>" in err, err
    else:
        assert "valueFrom.secretKeyRef" in err, err


def test_a_secret_is_refused_in_the_values_of_a_part_that_is_not_enabled():
    """The values go into Helm's release Secret whether or not the part renders."""
    _refused_with("vllm.env", "is given as a literal value", "vllm.env[0].name=HF_TOKEN",
                  "vllm.env[0].value=x")  # fmt: skip


@pytest.mark.parametrize("env_key", ENV_KEYS)
def test_the_neighbours_of_a_secret_render(env_key):
    """A token by reference; a credentials variable that names a file; a name that only
    contains a token word; a value that only starts like one."""
    extra = ENV_KEYS[env_key]
    neighbours = [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
        {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": "/var/secrets/key.json"},
        {"name": "MAX_TOKENS", "value": "12"},
        {"name": "TOKENIZER_PATH", "value": "/data/tok"},
        {"name": "RUN_NOTE", "value": "hf_short"},
    ]
    given = f"{env_key}={json.dumps(neighbours)}"
    docs = render(None, *BUCKET, *_sets(*extra), "--set-json", given)
    rendered = yaml.safe_dump(docs)
    assert "/var/secrets/key.json" in rendered and "TOKENIZER_PATH" in rendered


ARG_KEYS = {
    "ray.job.args": ["ray.job.enabled=true"],
    "vllm.extraArgs": VLLM,
    "saxml.modelServer.extraArgs": SAXML,
}


@pytest.mark.parametrize("arg_key", ARG_KEYS)
@pytest.mark.parametrize("arg", ["hf_access_token=x", "--hf-token=x", f"--note={HF}", HF])
def test_a_secret_in_any_argument_list_is_refused(arg_key, arg):
    args = ["base.yml", arg] if arg_key == "ray.job.args" else ["--max-num-seqs=8", arg]
    sets = [*ARG_KEYS[arg_key]]
    err = refused(*BUCKET, *_sets(*sets), "--set-json", f"{arg_key}={json.dumps(args)}")
    assert f"{arg_key}: argument 1 gives a secret in plain values" in err, err
    assert HF not in err  # the message does not repeat the secret


@pytest.mark.parametrize("arg_key", ARG_KEYS)
def test_the_neighbours_of_a_secret_argument_render(arg_key):
    args = ["tokenizer_path=/data/tok", "max_target_length=128", "--token-budget=8"]
    if arg_key == "ray.job.args":
        args = ["base.yml", "run_name=r", *args]
    sets = _sets(*ARG_KEYS[arg_key])
    assert render(None, *BUCKET, *sets, "--set-json", f"{arg_key}={json.dumps(args)}")


# An env name the chart sets in each part's containers, given again by that part's env.
OWN_ENV = [
    ("ray.head.env", "LAUNCHER_OUTPUT_DIR", [], "RayCluster tpu-ray, container ray-head"),
    ("ray.worker.env", "LAUNCHER_OUTPUT_DIR", [], "RayCluster tpu-ray, container ray-worker"),
    ("ray.worker.env", "TPU_CAPACITY", RAYJOB, "RayJob tpu-ray, container ray-worker"),
    ("vllm.env", "HF_HUB_OFFLINE", VLLM, "Deployment tpu-vllm, container vllm"),
    ("vllm.env", "HOME", [*VLLM, "vllm.tpu.type=v6e-16"],
     "RayService tpu-vllm, container ray-head"),
    ("vllm.env", "VLLM_XLA_CACHE_PATH", [*VLLM, "vllm.tpu.type=v6e-16", "vllm.controller=lws"],
     "LeaderWorkerSet tpu-vllm, container"),
]  # fmt: skip


@pytest.mark.parametrize(("env_key", "name", "extra", "where"), OWN_ENV)
def test_an_env_name_the_chart_sets_given_again_is_refused_on_every_part(
    env_key, name, extra, where
):
    err = refused(*BUCKET, *_sets(*extra, f"{env_key}[0].name={name}", f"{env_key}[0].value=/x"))
    assert f"{env_key}: {where}" in err, err
    assert f"env {name} is set twice" in err and f"remove it from {env_key}" in err, err
    # Its neighbour, a name the chart does not set, renders.
    assert render(None, *BUCKET, *_sets(*extra, f"{env_key}[0].name=MY_{name}",
                                        f"{env_key}[0].value=/x"))  # fmt: skip


def test_a_volume_mounted_where_the_chart_mounts_another_is_refused():
    memory = ["checkpoints.tier=memory", "checkpoints.memorySize=8Gi", "ray.worker.tpu.slices=2"]
    err = refused(*BUCKET, *_sets(*memory, "global.gcsfuse.mountPath=/checkpoints-memory"))
    assert "global.gcsfuse.mountPath: RayCluster tpu-ray, container ray-worker" in err, err
    assert "both mounted at /checkpoints-memory, which the API server refuses" in err, err
    assert render(None, *BUCKET, *_sets(*memory, "global.gcsfuse.mountPath=/checkpoints"))


def _pod_template_files() -> set[str]:
    """The POD_TEMPLATE_FILES the rendered-pod rule reads (_refusals.tpl)."""
    text = (CHART / "templates" / "_refusals.tpl").read_text()
    (line,) = [x for x in text.splitlines() if "POD_TEMPLATE_FILES" in x and "$files" in x]
    return set(re.findall(r'"([^"]+\.yaml)"', line))


def _has_containers(node) -> bool:
    if isinstance(node, dict):
        return isinstance(node.get("containers"), list) or any(
            _has_containers(v) for v in node.values()
        )
    return isinstance(node, list) and any(_has_containers(v) for v in node)


def test_the_rendered_pod_rule_reads_every_template_that_renders_a_pod():
    """Every template that renders a pod, under any preset or engine, is in the rule's list:
    a new one left out would go unchecked."""
    seen: set[str] = set()
    presets = sorted((REPO / "values").glob("*.yaml"))
    for preset in presets:
        for extra in ([], RAYJOB):
            args = ["template", "tpu", str(CHART), "-f", str(preset), *BUCKET]
            proc = run_helm(3, *args, *_sets("vllm.apiKey.secretName=k", *extra))
            assert proc.returncode == 0, (preset, proc.stderr)
            for doc in proc.stdout.split("\n---"):
                source = re.search(r"# Source: tpu-stack/templates/(\S+)", doc)
                if source and _has_containers(yaml.safe_load(doc)):
                    seen.add(source[1])
    assert {"ray/raycluster.yaml", "ray/rayjob.yaml", "vllm/rayservice.yaml"} <= seen
    assert seen <= _pod_template_files(), seen - _pod_template_files()


def _capacity_labels() -> list[str]:
    table = json.loads((CHART / "files" / "tpu-table.json").read_text())
    labels = {k for c in table["capacities"].values() for k in c["nodeSelector"]}
    return sorted(labels | {table["capacityFallback"]["computeClassLabel"]})


@pytest.mark.parametrize("label", _capacity_labels())
def test_a_capacity_label_beside_the_capacity_is_refused(label):
    key = "ray.worker.nodeSelector." + label.replace(".", "\\.")
    for capacity in ("on-demand", "{spot,on-demand}"):  # one capacity, and a fallback list
        err = refused(*BUCKET, "--set", f"ray.worker.tpu.capacity={capacity}",
                      "--set-string", f"{key}=x")  # fmt: skip
        assert f"ray.worker.nodeSelector: {label} says how the TPUs are obtained" in err, err
    # Neighbours: a label of the team's own on the workers; Spot for the CPU head.
    assert render(
        None,
        *BUCKET,
        "--set-string",
        "ray.worker.nodeSelector.team=ml",
        "--set-string",
        "ray.head.nodeSelector.cloud\\.google\\.com/gke-spot=true",
    )


@pytest.mark.parametrize(
    ("sets", "key", "says"),
    [
        # A value the part ignores: refused as its mirror cases are.
        (
            [
                "ray.framework=torch",
                "ray.image.tag=t-torch",
                "checkpoints.tier=memory",
                "checkpoints.memorySize=8Gi",
                "ray.worker.tpu.slices=2",
            ],
            "checkpoints.tier",
            "a PyTorch job (ray.framework=torch) saves through its own",
        ),
        (
            [*VLLM, "vllm.engineKwargs.max_num_seqs=8"],
            "vllm.engineKwargs",
            "this release's Deployment runs vLLM's own server",
        ),
        (
            [
                *VLLM,
                "vllm.tpu.type=v6e-16",
                "vllm.controller=lws",
                "vllm.engineKwargs.max_num_seqs=8",
            ],
            "vllm.engineKwargs",
            "this release's LeaderWorkerSet runs vLLM's own server",
        ),
        # A feature's version floor, and the name budget KubeRay's derived names leave.
        (
            [*VLLM, "vllm.tpu.type=v6e-16", "vllm.rayService.rayVersion=2.55.0"],
            "vllm.rayService.rayVersion",
            "2.55.0 is older than Ray 2.60",
        ),
        (
            [*VLLM, "vllm.tpu.type=v6e-16", f"vllm.fullnameOverride={'s' * 35}"],
            "vllm.fullnameOverride",
            "its cluster's name adds 6",
        ),
    ],
)
def test_values_a_part_ignores_or_cannot_meet_are_refused(sets, key, says):
    _refused_with(key, says, *sets)


def test_the_neighbours_of_ignored_values_render():
    assert render(None, *BUCKET, *_sets("ray.framework=torch", "ray.image.tag=t-torch"))
    assert render(
        None,
        *BUCKET,
        *_sets(
            *VLLM,
            "vllm.tpu.type=v6e-16",
            "vllm.engineKwargs.max_num_seqs=8",
            "vllm.rayService.rayVersion=2.61.0",
            f"vllm.fullnameOverride={'s' * 34}",
        ),
    )


# vllm.engineKwargs against the pinned vLLM's own engine fields (files/vllm-engine-args.json,
# read from vllm-tpu's vllm/engine/arg_utils.py by ci/vllm_engine_args.py; make verify holds it
# to that source).
ENGINE_ARGS = json.loads((CHART / "files" / "vllm-engine-args.json").read_text())
RAYSERVICE = [*VLLM, "vllm.tpu.type=v6e-16"]


def _engine_kwargs(docs: list[dict]) -> dict:
    service = next(d for d in docs if d["kind"] == "RayService")
    app = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]
    return app["args"]["llm_configs"][0]["engine_kwargs"]


def test_the_engine_fields_are_vllms_of_the_pinned_tag():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert ENGINE_ARGS["tag"] == values["vllm"]["image"]["tag"]
    # Fields vLLM's engine has had for many releases, and one Ray Serve LLM's config reads.
    assert {"max_num_seqs", "gpu_memory_utilization", "enable_log_requests"} <= set(
        ENGINE_ARGS["fields"]
    )
    assert "max-num-seqs" not in ENGINE_ARGS["fields"]


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("max-num-seqs", '"max-num-seqs" is not an engine argument\'s name'),
        ("max_num_sequences", '"max_num_sequences" is not an engine argument of vLLM v0.32.0'),
        # Ray Serve LLM refuses these and sets them from model_loading_config.
        ("model", "model is the chart's (from vllm.model)"),
        ("served_model_name", "served_model_name is the chart's (from vllm.servedModelName)"),
    ],
)
def test_an_engine_argument_vllm_does_not_take_is_refused(key, says, tmp_path):
    values = tmp_path / "v.yaml"  # a dashed key through --set would need escaping
    values.write_text(yaml.safe_dump({"vllm": {"engineKwargs": {key: 8}}}))
    err = refused(*BUCKET, *_sets(*RAYSERVICE), values=values)
    assert "vllm.engineKwargs: " in err and says.replace("v0.32.0", ENGINE_ARGS["tag"]) in err, err


def test_engine_arguments_vllm_takes_render_and_reach_the_engine():
    out = render(
        None,
        *BUCKET,
        *_sets(*RAYSERVICE, "vllm.engineKwargs.max_num_seqs=8"),
        "--set-json",
        "vllm.engineKwargs.enable_prefix_caching=true",
    )
    engine = _engine_kwargs(out)
    assert engine["max_num_seqs"] == 8 and engine["enable_prefix_caching"] is True, engine


def test_with_another_vllm_tag_only_the_fields_form_is_checked(tmp_path):
    other = [*RAYSERVICE, "vllm.image.tag=v9.0.0"]
    # A field newer than the pinned vLLM passes on an image that may have it...
    assert render(None, *BUCKET, *_sets(*other, "vllm.engineKwargs.max_num_sequences=8"))
    # ...a flag's form never does.
    values = tmp_path / "v.yaml"
    values.write_text(yaml.safe_dump({"vllm": {"engineKwargs": {"max-num-seqs": 8}}}))
    err = refused(*BUCKET, *_sets(*other), values=values)
    assert "(max_num_seqs, as vLLM's engine takes them)" in err, err
