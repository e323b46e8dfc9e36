"""Every gcloud command every plan prints, held to Google's own authorities instead of our
reading of its pages: the installed gcloud's parser and system-configuration loader (no call,
no credentials), and the APIs' discovery documents (google-api-python-client, pinned in the dev
lock) for every field a plan reads or writes: filters' and formats' field paths, the node
system configuration's fields and values.

Plans: every values file, under every way of obtaining the TPUs (on-demand; Spot at the default
grace and at longer ones, whose pools get a node system configuration; flex-start with and
without a Kueue queue; a reservation, a shared one), as a RayJob and as a release that gives
idle slices back, in a standard zone and an AI zone; `gke up`'s plan and `gke down`'s."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache

import pytest
import yaml

from harness.helm import CHART, VALUES_FILES, helm
from launcher import cli
from launcher.client.gke import commands as gke_commands
from launcher.client.gke.gcloud_check import NEWER
from launcher.client.gke.plan import down_plan
from launcher.client.gke.steps import Plan
from launcher.client.gke.target import region
from launcher.core.errors import UsageError
from launcher.core.tpu.table import parent_zone
from tests.support import gke_discovery, installed_gcloud

pytestmark = pytest.mark.chart

WAYS = {
    "on-demand": ["--capacity=on-demand"],
    "spot": ["--capacity=spot"],
    "spot-60s": ["--capacity=spot", "--set", "ray.worker.terminationGracePeriodSeconds=60"],
    "spot-105s": ["--capacity=spot", "--set", "ray.worker.terminationGracePeriodSeconds=105"],
    "flex-start": ["--capacity=flex-start"],
    "flex-start-queued": ["--capacity=flex-start", "--set", "kueue.queueName=q"],
    "reservation": ["--capacity=reservation", "--reservation=r1"],
    "shared-reservation": [
        "--capacity=reservation",
        "--reservation=projects/other-proj/reservations/r1",
    ],
    # A capacity fallback: a pool per item, walked by a ComputeClass or by Kueue's flavors.
    "fallback-computeclass": ["--capacity=reservation:r1,on-demand,spot"],
    "fallback-kueue": [
        "--capacity=reservation:r1,on-demand,spot,flex-start",
        "--set",
        "kueue.queueName=q",
    ],
    "rayjob": ["--set", "ray.job.enabled=true", "--set", "ray.job.args={base.yml,run_name=r}"],
    "idle-release": ["--set", "ray.worker.tpu.releaseIdleAfterSeconds=1800"],
    "migrating": ["--migrate-node-metadata"],
}
ZONES = ("us-east5-a", "us-central1-ai1a")  # a standard zone, an AI zone (its region's cluster)

# The API (discovery document) and schema of the resource each gcloud command group lists or
# describes: what its --filter and --format=value(...) field paths are paths of.
RESOURCES = {
    ("container", "clusters"): ("container", "Cluster"),
    ("container", "node-pools"): ("container", "NodePool"),
    # --flatten=channels: each row's `channels` is one ReleaseChannelConfig.
    ("container", "get-server-config"): ("container", "ServerConfig"),
    ("artifacts", "repositories"): ("artifactregistry", "Repository"),
    ("services", "list"): ("serviceusage", "GoogleApiServiceusageV1Service"),
    ("projects", "describe"): ("cloudresourcemanager", "Project"),
    ("compute", "zones"): ("compute", "Zone"),
}

# What the plans use that some gclouds do not know yet, each with its source, is the launcher's
# own list (gke/gcloud_check.NEWER: `gke up` asks the installed gcloud for these before any
# step): gcloud 528.0.0's system-configuration loader refuses both Spot shutdown fields.


@cache
def plans() -> tuple[tuple[str, Plan], ...]:
    """(what, plan) for every values file x way x zone: up's and down's."""
    found = []
    for values in VALUES_FILES:
        for way, flags in WAYS.items():
            args = ["gke", "plan", "--values", str(values), "--chart", str(CHART)]
            args += ["--helm", str(helm(3)), "--project=p", "--cluster=c", "--bucket=my-ckpts"]
            args += [f"--location={ZONES[0]}", f"--allow-zone={ZONES[0]}", *flags]
            ns = cli._parser().parse_args(args)
            try:
                target, need = gke_commands._read_release(ns)
            except UsageError as e:  # what the chart refuses: flex-start on v4; no Ray job;
                # flex-start in a ComputeClass (vLLM's and Saxml's slices wait in no queue)
                refused = r"no flex-start for TPU v4|ray\.job|flex-start in a ComputeClass"
                assert re.search(refused, str(e)), (values, way, e)
                continue
            for zone in ZONES:
                # An AI zone holds the TPU pools of a cluster in its region (gke/plan.py).
                ai = parent_zone(zone) is not None
                at = replace(
                    target,
                    location=region(zone) if ai else zone,
                    node_zone=zone if ai else None,
                    allow_zone=zone,
                )
                what = f"{values.name} {way} {zone}"
                found.append((f"{what} up", gke_commands._up_plan(ns, at, need)))
                found.append((f"{what} down", down_plan(need, at, ns.release, ns.namespace)))
    return tuple(found)


def _terms(expression: str) -> list[tuple[str, str, str]]:
    """(field path, operator, value) of each term of a gcloud --filter."""
    terms = []
    for term in re.split(r" AND | OR ", expression):
        term = term.strip("() ").removeprefix("NOT ")
        path, op, value = re.match(r"([\w.-]+)\s*([=:~])?(.*)", term).groups()  # type: ignore[union-attr]
        terms.append((path, op or "", value))
    return terms


def _fields_read(argv: list[str]) -> list[tuple[str, str, str]]:
    """(path, operator, value) of every field a command's --filter and --format read."""
    found = []
    for word in argv:
        if word.startswith("--filter="):
            found += _terms(word.removeprefix("--filter="))
        if m := re.fullmatch(r"--format=value\((.*)\)", word):
            found += [(f.removesuffix(".basename()"), "", "") for f in m[1].split(",")]
    return found


def test_every_field_a_plan_reads_or_writes_is_in_googles_published_api():
    """Every filter's and format's field path exists in the resource's schema, with a value its
    type, enum and stated rules allow; every field of a node system configuration exists in
    NodeConfig with an allowed value. The Spot pools' old node shutdown (the workers' grace +
    15, 45 s at the default) is refused by the same check: GKE allows 0, 30 or 120."""
    print(f"GKE API (container v1) discovery revision {gke_discovery.revision()}")
    wrong: set[str] = set()
    fields = 0
    for what, plan in plans():
        for argv in plan.commands("gcloud"):
            read = _fields_read(argv)
            if not read:
                continue
            resource = RESOURCES.get((argv[1], argv[2]))
            assert resource, f"no schema named for `{' '.join(argv[:3])}` ({what})"
            api, schema = resource
            for path, op, value in read:
                fields += 1
                spec = gke_discovery.resolve(schema, path, api)
                if isinstance(spec, str):
                    wrong.add(f"{' '.join(argv[1:3])}: {spec}")
                elif op == "=" and (why := gke_discovery.refusal(spec, value)):
                    wrong.add(f"{' '.join(argv[1:3])}: {schema}.{path}={value}: {why}")
        for step in plan.steps:
            if step.writes:
                wrong.update(_system_config_refusals(yaml.safe_load(step.writes[1])))
    assert fields > 1000, fields  # the plans read fields at all
    assert not wrong, "\n".join(sorted(wrong))
    old = {"kubeletConfig": {"shutdownGracePeriodSeconds": 30 + 15}}
    assert _system_config_refusals(old) == [
        "NodeConfig.kubeletConfig.shutdownGracePeriodSeconds=45: 45 is not an allowed value "
        "(0, 30, 120)"
    ]


def _system_config_refusals(config: dict) -> list[str]:
    """Why GKE's API would refuse a node system configuration (NodeConfig's fields)."""
    wrong = []
    kubelet = config.get("kubeletConfig", {})
    for section, values in config.items():
        for name, value in values.items():
            spec = gke_discovery.resolve("NodeConfig", f"{section}.{name}")
            why = spec if isinstance(spec, str) else gke_discovery.refusal(spec, str(value))
            if why:
                wrong.append(f"NodeConfig.{section}.{name}={value}: {why}")
    # NodeKubeletConfig.shutdownGracePeriodCriticalPodsSeconds: "This value should be <=
    # shutdown_grace_period_seconds".
    critical = kubelet.get("shutdownGracePeriodCriticalPodsSeconds")
    described = gke_discovery.field("NodeKubeletConfig", "shutdownGracePeriodCriticalPodsSeconds")
    assert "<= shutdown_grace_period_seconds" in described["description"]
    if critical is not None and critical > kubelet.get("shutdownGracePeriodSeconds", 0):
        wrong.append(f"shutdownGracePeriodCriticalPodsSeconds={critical} > the node's shutdown")
    return wrong


def test_every_printed_gcloud_command_is_one_the_installed_gcloud_parses(tmp_path):
    """gcloud's own parser (an unknown flag, a bad choice, a file it cannot read) and its node
    system-configuration loader take every command of every plan, but for what is listed as
    newer than some gclouds (NEWER), each with its source. Under .ci/run
    (TPU_STACK_REQUIRE_GCLOUD=1) a machine without gcloud fails here instead of skipping."""
    root = installed_gcloud.required()
    argvs: dict[tuple[str, ...], str] = {}
    for what, plan in plans():
        files = {}
        for step in plan.steps:
            if step.writes:  # the plan writes it before the command that reads it
                path = tmp_path / str(len(list(tmp_path.iterdir())))
                path.write_text(step.writes[1])
                files[step.writes[0]] = str(path)
        for argv in plan.commands("gcloud"):
            words = tuple(_with_files(w, files) for w in argv[1:])
            argvs.setdefault(words, what)
    said = installed_gcloud.refusals(root, [list(a) for a in argvs])
    newer, wrong = set(), []
    for (argv, what), refusal in zip(argvs.items(), said, strict=True):
        if refusal is None:
            continue
        known = {n for n in NEWER if n in refusal}
        if known:
            newer |= known
        else:
            wrong.append(f"{what}: gcloud {' '.join(argv)}\n  {refusal}")
    print(f"gcloud {installed_gcloud.version(root)} parsed {len(argvs)} distinct commands")
    for name in sorted(newer):
        print(f"  newer than this gcloud: {name} ({NEWER[name]})")
    assert len(argvs) > 100, len(argvs)
    assert not wrong, "\n".join(wrong)


def _with_files(word: str, files: dict[str, str]) -> str:
    key, eq, value = word.partition("=")
    return f"{key}={files[value]}" if eq and value in files else word


def test_the_parser_check_refuses_what_gcloud_refuses():
    """The check is gcloud's, not a stub: an unknown flag and a bad choice are refused."""
    root = installed_gcloud.required()
    create = ["container", "node-pools", "create", "p", "--cluster=c", "--location=us-east5-a"]
    said = installed_gcloud.refusals(
        root, [[*create, "--tpu-topologie=4x4"], [*create, "--placement-type=TIGHT"], create]
    )
    assert "unrecognized arguments: --tpu-topologie" in str(said[0])
    assert "Invalid choice: 'TIGHT'" in str(said[1]) and said[2] is None
