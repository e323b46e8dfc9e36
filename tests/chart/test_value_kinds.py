"""Rules, not cases: each kind of value the API server, GKE or IAM checks has one rule in the
chart (a definition in values.schema.json, or one helper template), as Kubernetes' own validation
has one function per kind, and every value of that kind is bound to it. The tests find the values
of each kind by their names, fail when one is not bound to its kind's rule (the next key added is
covered, or this test says so), and render each with a value the rule must refuse, beside the
same place with a value it must take."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from harness.helm import BUCKET, CHART, refused, run_helm

pytestmark = pytest.mark.chart

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
TEMPLATES = "\n".join(p.read_text() for p in (CHART / "templates").rglob("*.tpl"))


class Kind:
    def __init__(self, rule: str, named: str, good: object, bad: object, why: str):
        self.rule = rule  # a schema definition, or "tpu-stack.<helper>"
        self.named = re.compile(named)  # the dotted paths of the values of this kind
        self.good, self.bad, self.why = good, bad, why


KINDS = {
    # apimachinery IsQualifiedName / IsValidLabelValue: a dashboard label with a space broke
    # the whole install.
    "labels": Kind(
        "labels",
        r"(^|\.)(labels|nodeSelector|matchLabels)$",
        {"grafana_folder": "llm-training"},
        {"grafana_folder": "LLM Training"},
        "a label value with a space",
    ),
    # (inside 10.0.0.0/8, the cidr an except's block gets here)
    "cidrs": Kind(
        "cidrs", r"(SourceRanges|\.except)$", ["10.1.0.0/16"], ["10.0.0.0/33"], "prefix past /32"
    ),
    "cidr": Kind("cidr", r"\.cidr$", "10.0.0.0/8", "10.0.0.300/8", "an octet past 255"),
    "resources": Kind(
        "resources",
        r"(^|\.)resources$",
        {"requests": {"memory": "16Gi"}, "limits": {"memory": "16Gi"}},
        {"requests": {"memory": "16Gi"}, "limits": {"memory": "16 GiB"}},
        "a quantity with a space and a unit Kubernetes does not have",
    ),
    "dnsLabel": Kind("dnsLabel", r"(^|\.)nameOverride$", "trainer", "Trainer_1", "not a DNS label"),
    "objectName": Kind("objectName", r"fullnameOverride$", "trainer", "1trainer", "a digit first"),
    # IAM: account ids of 6-30; a domain-scoped project's accounts are legal.
    "gcpServiceAccount": Kind(
        "gcpServiceAccount",
        r"gcpServiceAccount$",
        "trainer@proj-1.example.com.iam.gserviceaccount.com",
        "trainer@my project.iam.gserviceaccount.com",
        "a space in the project",
    ),
    # Compute Engine resource names (RFC 1035): GKE never matches another, pods stay Pending.
    "reservation": Kind(
        "reservation",
        r"\.tpu\.reservation$",
        "v6e-res",
        "My_Reservation",
        "uppercase and '_'",
    ),
    # Paths under the bucket's mount, and prefixes in the bucket: ".." would leave it.
    "bucketMountPath": Kind(
        "tpu-stack.pathErrors",
        r"(mountPath|^vllm\.model)$",
        "/data/models/m",
        "/data/../etc",
        "a '..' part",
    ),
    "bucketPrefix": Kind(
        "tpu-stack.pathErrors", r"[pP]refix$", "caches/vllm", "caches/../../other", "a '..' part"
    ),
}

# What a value needs around it to be rendered at all (the part that uses it switched on).
CONTEXT = {
    "vllm": ["serving.engine=vllm", "vllm.model=/data/m", "vllm.apiKey.secretName=k"],
    "saxml": ["serving.engine=saxml"],
    "monitoring": ["monitoring.enabled=true"],
}
CONTEXT.update(
    {
        f"{block}.reservation": [f"{block}.capacity=reservation"]
        for block in ("ray.worker.tpu", "vllm.tpu", "saxml.modelServer.tpu")
    }
)
# A valid list item around a value: an ipBlock needs its cidr (and takes no selector beside it).
IP_BLOCK = {"ipBlock": {"cidr": "10.0.0.0/8"}}


def _resolve(node: dict) -> tuple[dict, str | None]:
    ref = node.get("$ref")
    if ref is None:
        return node, None
    name = ref.rsplit("/", 1)[1]
    return SCHEMA["definitions"][name], name


def _paths(node: dict, path: str = ""):
    """(dotted path, the definition it refers to or None) of every value the schema allows;
    a list's items are `path[]`."""
    node, ref = _resolve(node)
    if path:
        yield path, ref
    for key, child in node.get("properties", {}).items():
        yield from _paths(child, f"{path}.{key}".lstrip("."))
    for branch in node.get("oneOf", []):
        yield from _paths(branch, path) if path else ()
    if isinstance(node.get("items"), dict) and not ref:
        yield from _paths(node["items"], f"{path}[]")


PATHS = sorted(set(_paths(SCHEMA)) - {(p, None) for p, r in _paths(SCHEMA) if r})


def _of_kind(kind: Kind) -> list[str]:
    return sorted({p for p, _ in PATHS if kind.named.search(p.replace("[]", ""))})


def test_every_value_of_a_kind_is_bound_to_its_rule():
    unbound = []
    for name, kind in KINDS.items():
        for path in _of_kind(kind):
            if kind.rule.startswith("tpu-stack."):
                bound = f'include "{kind.rule}" (dict "key" "{path}"' in TEMPLATES
            else:
                bound = (path, kind.rule) in PATHS
            if not bound:
                unbound.append(f"{path} ({name}: bind it to {kind.rule})")
    assert not unbound, unbound
    assert all(_of_kind(k) for k in KINDS.values())  # each kind's names find something


def _values(path: str, value: object) -> dict:
    """The values that put `value` at `path` (a list's item: the list's valid item with it)."""
    head, _, rest = path.partition("[].")
    if rest:
        item = json.loads(json.dumps(IP_BLOCK)) if rest.startswith("ipBlock.") else {}
        node = item
        *parents, last = rest.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
        value, path = [item], head
    out: dict = {}
    node = out
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return out


CASES = [(name, path) for name, kind in KINDS.items() for path in _of_kind(kind)]


@pytest.mark.parametrize(("kind", "path"), CASES, ids=[f"{k}:{p}" for k, p in CASES])
def test_each_value_of_a_kind_takes_a_good_one_and_refuses_a_bad_one(kind, path, tmp_path):
    rule = KINDS[kind]
    context = [
        a
        for where, sets in CONTEXT.items()
        if path.startswith(where)
        for s in sets
        if not s.startswith(f"{path}=")  # the value under test is the file's
        for a in ("--set", s)
    ]
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(_values(path, rule.good)))
    bad.write_text(yaml.safe_dump(_values(path, rule.bad)))
    taken = run_helm(3, "template", "tpu", str(CHART), *BUCKET, *context, "-f", str(good))
    assert taken.returncode == 0, f"{path}={rule.good!r} was refused:\n{taken.stderr}"
    err = refused(*BUCKET, *context, values=Path(bad))
    where = path.replace("[]", ".0").replace(".", "/")
    assert f"'/{where}" in err or f"{path.replace('[]', '')}:" in err, (rule.why, err)


LABEL_PATHS = _of_kind(KINDS["labels"])


@pytest.mark.parametrize("path", LABEL_PATHS)
def test_a_label_key_the_api_server_refuses_is_refused_where_it_is(path, tmp_path):
    # Keys by patternProperties: a propertyNames refusal would name a random key of the values
    # (Helm's JSON-schema library, santhosh-tekuri/jsonschema#258).
    context = [a for where, sets in CONTEXT.items() if path.startswith(where) for s in sets
               for a in ("--set", s)]  # fmt: skip
    bad = tmp_path / "bad.yaml"
    # A key's form, and its length: past 317 (a 253-character prefix, '/', a 63-character name).
    for key in ("Bad Key", f"{'a.' * 126}aa/{'n' * 63}"):
        bad.write_text(yaml.safe_dump(_values(path, {key: "v"})))
        err = refused(*BUCKET, *context, values=Path(bad))
        where = "/" + path.replace("[]", "/0").replace(".", "/")
        assert f"at '{where}" in err, err
        assert key in err or key.replace("/", "~1") in err, err  # a JSON pointer's escape
