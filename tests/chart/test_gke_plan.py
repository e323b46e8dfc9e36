"""`make gke-plan` / `make gke-up`: the gcloud commands a release needs, read from the chart's own
rendering. gcloud and GKE cannot run here: the commands are pinned per values file against the
GKE tutorials' own (written below as facts), and `gke-up` runs against a FAKE gcloud (a script
that records its arguments), which shows the order, the skip of what exists, and the stop at
the first failure."""

from __future__ import annotations

import os
import stat

import pytest

from launcher import cli
from tests.support.helm import CHART, VALUES_FILES, helm
from tests.support.paths import REPO

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
    "cpu.yaml": [],
}


def _plan(capsys, values: str, *flags: str) -> str:
    args = ["gke-plan", "--values", str(REPO / "values" / values), "--chart", str(CHART)]
    assert cli.main([*args, "--helm", str(helm(3)), *flags]) == 0
    return capsys.readouterr().out


def _commands(script: str) -> list[list[str]]:
    """The plan's commands, each as its words (continuation lines joined)."""
    joined = script.replace(" \\\n    ", " ")
    return [line.split() for line in joined.splitlines() if line.startswith("gcloud")]


def _flag(words: list[str], name: str) -> str | None:
    found = [w.split("=", 1)[1] for w in words if w.startswith(f"--{name}=")]
    return found[0] if found else None


@pytest.mark.parametrize("values", sorted(POOLS))
def test_node_pools_per_values_file(capsys, values):
    pools = [
        c
        for c in _commands(_plan(capsys, values))
        if c[1:4] == ["container", "node-pools", "create"]
    ]
    assert [
        (c[4], _flag(c, "machine-type"), _flag(c, "tpu-topology"), _flag(c, "num-nodes"))
        for c in pools
    ] == POOLS[values]
    for c in pools:
        assert ("--placement-type=COMPACT" in c) == (_flag(c, "tpu-topology") is not None)


def test_the_whole_plan_for_the_tutorials_slice(capsys):
    script = _plan(
        capsys,
        "v6e-16.yaml",
        "--project=my-proj",
        "--cluster=ml",
        "--location=us-east5-b",
        "--bucket=my-ckpts",
        "--spot",
    )
    assert [c[1:4] for c in _commands(script)] == [
        ["container", "clusters", "update"],  # add-ons
        ["container", "clusters", "update"],  # workload pool
        ["container", "node-pools", "create"],
        ["storage", "buckets", "create"],
        ["storage", "buckets", "add-iam-policy-binding"],
    ]
    assert "--update-addons=RayOperator=ENABLED,GcsFuseCsiDriver=ENABLED" in script
    assert "--workload-pool=my-proj.svc.id.goog" in script
    bucket = next(c for c in _commands(script) if c[1:4] == ["storage", "buckets", "create"])
    assert bucket[4:] == [
        "gs://my-ckpts",
        "--project=my-proj",
        "--location=us-east5",
        "--uniform-bucket-level-access",
        "--enable-hierarchical-namespace",
    ]
    # The release's own service account (rendered by the chart), as the tutorial binds it.
    assert (
        "--member=principal://iam.googleapis.com/projects/${PROJECT_NUMBER}/locations/global/"
        "workloadIdentityPools/my-proj.svc.id.goog/subject/ns/default/sa/tpu-tpu-stack"
    ) in script
    assert "PROJECT_NUMBER=$(gcloud projects describe my-proj" in script
    assert "--spot" in next(c for c in _commands(script) if c[2] == "node-pools")
    assert "Set " not in script  # nothing left to fill in


def test_a_google_service_account_gets_the_bucket_and_the_binding(capsys, tmp_path):
    gsa = "trainer@my-proj.iam.gserviceaccount.com"
    extra = tmp_path / "gsa-values.yaml"
    extra.write_text(f"global:\n  serviceAccount:\n    gcpServiceAccount: {gsa}\n")
    script = _plan(capsys, "v6e-16.yaml", "--values", str(extra), "--project=my-proj")
    assert f"--member=serviceAccount:{gsa}" in script
    assert "--role=roles/iam.workloadIdentityUser" in script
    assert "--member=serviceAccount:my-proj.svc.id.goog[default/tpu-tpu-stack]" in script
    assert "PROJECT_NUMBER" not in script


def test_unset_places_are_named(capsys):
    script = _plan(capsys, "v6e-16.yaml")
    assert "# Set BUCKET, CLUSTER_NAME, LOCATION, NODE_ZONE, PROJECT_ID first" in script


FAKE_GCLOUD = """#!/bin/sh
# A FAKE gcloud: records its arguments; `describe` of what is listed in $EXISTING succeeds,
# other describes fail (nothing exists); the command containing $FAIL_ON fails.
echo "$*" >> "$GCLOUD_LOG"
case "$*" in
  "projects describe"*) echo 123456789; exit 0;;
  *describe*) for e in $EXISTING; do case "$*" in *"$e"*) exit 0;; esac; done; exit 1;;
esac
case "$*" in *"$FAIL_ON"*) echo "ERROR: (gcloud) quota exceeded" >&2; exit 1;; esac
exit 0
"""


@pytest.fixture
def fake_gcloud(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "gcloud"
    script.write_text(FAKE_GCLOUD)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "gcloud.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("GCLOUD_LOG", str(log))
    monkeypatch.setenv("EXISTING", "")
    monkeypatch.setenv("FAIL_ON", "no-such-command")
    return log


UP = [
    "gke-up",
    "--project=my-proj",
    "--cluster=ml",
    "--location=us-east5-b",
    "--bucket=my-ckpts",
]


def _up(values: str, *flags: str) -> int:
    args = [*UP, "--values", str(REPO / "values" / values), "--chart", str(CHART)]
    return cli.main([*args, "--helm", str(helm(3)), *flags])


def test_gke_up_runs_every_step_in_order(fake_gcloud, capsys):
    assert _up("v6e-16-x2.yaml") == 0
    ran = [line for line in fake_gcloud.read_text().splitlines() if "describe" not in line]
    # (the existence checks ran first: every describe failed, so every step ran)
    assert [r.split()[:3] for r in ran] == [
        ["container", "clusters", "update"],
        ["container", "clusters", "update"],
        ["container", "node-pools", "create"],
        ["container", "node-pools", "create"],
        ["storage", "buckets", "create"],
        ["storage", "buckets", "add-iam-policy-binding"],
    ]
    # The captured project number is substituted into the principal.
    assert "projects/123456789/locations/global" in ran[-1]
    assert "done: 7 steps" in capsys.readouterr().out


def test_gke_up_skips_what_exists(fake_gcloud, monkeypatch, capsys):
    monkeypatch.setenv("EXISTING", "tpu-ray-v6e-16-0 gs://my-ckpts")
    assert _up("v6e-16.yaml") == 0
    out = capsys.readouterr().out
    assert "node pool tpu-ray-v6e-16-0" in out and "exists, skipped" in out
    created = fake_gcloud.read_text()
    assert "node-pools create" not in created and "buckets create" not in created


def test_gke_up_stops_at_the_first_failure_and_names_it(fake_gcloud, monkeypatch, capfd):
    monkeypatch.setenv("FAIL_ON", "tpu-ray-v6e-16-0")
    assert _up("v6e-16-x2.yaml") != 0
    err = capfd.readouterr().err  # gcloud's own message, then which step failed
    assert "node pool tpu-ray-v6e-16-0" in err and "quota exceeded" in err
    assert "tpu-ray-v6e-16-1" not in fake_gcloud.read_text()  # nothing after the failure


def test_gke_up_without_gcloud_says_so_and_prints_the_plan(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no gcloud here
    assert _up("v6e-16.yaml") == 1
    out = capsys.readouterr().out
    assert "gcloud is not installed" in out and "--tpu-topology=4x4" in out


def test_gke_up_refuses_an_unfinished_plan(fake_gcloud, capsys):
    values = str(REPO / "values" / "v6e-16.yaml")
    args = ["gke-up", "--values", values, "--chart", str(CHART), "--helm", str(helm(3))]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "CLUSTER_NAME" in err and "PROJECT=" in err
    assert not fake_gcloud.exists()  # nothing ran


def test_an_existing_service_account_is_the_one_bound(capsys, tmp_path):
    existing = tmp_path / "existing-sa.yaml"
    existing.write_text("global:\n  serviceAccount:\n    create: false\n    name: trainer-ksa\n")
    script = _plan(capsys, "v6e-16.yaml", "--values", str(existing))
    assert script.count("/subject/ns/default/sa/trainer-ksa") == 1


def test_values_the_chart_refuses_are_refused_with_the_charts_message(capsys, tmp_path):
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("ray:\n  worker:\n    tpu:\n      type: v6e-20\n")
    args = ["gke-plan", "--values", str(wrong), "--chart", str(CHART), "--helm", str(helm(3))]
    assert cli.main(args) != 0
    err = capsys.readouterr().err
    assert "render the release failed" in err and "did you mean v6e-16 or v6e-32?" in err


def test_every_values_file_has_its_expected_pools():
    assert set(POOLS) == {p.name for p in VALUES_FILES}
