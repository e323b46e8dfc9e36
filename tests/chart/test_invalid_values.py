"""Values the chart must refuse at `helm install`, each with its own message naming the value
and the fix (the webhook, the operator or the API server would refuse them later, or worse)."""

from __future__ import annotations

import pytest

from tests.support.helm import BUCKET, refused

pytestmark = pytest.mark.chart

CASES = [
    # (id, --set arguments, what the message must say)
    ("misspelled key", ["ray.worker.tpuu=1"], "additional properties 'tpuu' not allowed"),
    (
        "no bucket",
        ["global.gcsfuse.bucketName="],
        "global.gcsfuse.bucketName: a bucket is required",
    ),
    (
        "bucket with gs://",
        ["global.gcsfuse.bucketName=gs://b"],
        "at '/global/gcsfuse/bucketName': 'gs://b' does not match pattern",
    ),
    (
        "hosts do not match topology",
        ["ray.worker.tpu.hostsPerSlice=3"],
        "3 hosts x 4 chips is not the 16 chips of topology 4x4",
    ),
    ("unknown generation", ["ray.worker.tpu.generation=v7z"], 'unknown TPU generation "v7z"'),
    (
        "topology of another generation",
        ["ray.worker.tpu.topology=2x2x2"],
        '"2x2x2" is not a v6e topology',
    ),
    (
        "node label of another generation",
        ["ray.worker.tpu.gkeAccelerator=tpu-v5p-slice"],
        "--set ray.worker.tpu.gkeAccelerator=tpu-v6e-slice",
    ),
    (
        "chips per host no machine has",
        ["ray.worker.tpu.chipsPerHost=8"],
        "cannot be built from hosts of 8 chips",
    ),
    (
        "wrong machine type",
        ["ray.worker.tpu.machineType=ct6e-standard-8t"],
        "--set ray.worker.tpu.machineType=ct6e-standard-4t",
    ),
    (
        "zero slices",
        ["ray.worker.tpu.slices=0"],
        "at '/ray/worker/tpu/slices': minimum: got 0, want 1",
    ),
    (
        "topology not NxM",
        ["ray.worker.tpu.topology=big"],
        "at '/ray/worker/tpu/topology': 'big' does not match pattern",
    ),
    ("release name too long", ["--name-template", "a" * 41], "is 45 characters"),
    (
        "group name not a DNS label",
        ["ray.worker.groupName=TPU_group"],
        "at '/ray/worker/groupName': 'TPU_group' does not match pattern",
    ),
    (
        "exposed head without auth",
        ["ray.auth.enabled=false", "ray.head.serviceType=LoadBalancer"],
        "lets anyone who reaches it run code",
    ),
    (
        "head service type",
        ["ray.head.serviceType=Ingress"],
        "at '/ray/head/serviceType': value must be one of",
    ),
    (
        "no service account",
        ["global.serviceAccount.create=false"],
        "global.serviceAccount.name: with create=false",
    ),
    (
        "workload identity not an email",
        ["global.serviceAccount.gcpServiceAccount=me"],
        "at '/global/serviceAccount/gcpServiceAccount': 'me' does not match pattern",
    ),
    (
        "mount path relative",
        ["global.gcsfuse.mountPath=data"],
        "at '/global/gcsfuse/mountPath': 'data' does not match pattern",
    ),
    (
        "second TPU selector",
        ["ray.worker.nodeSelector.cloud\\.google\\.com/gke-tpu-topology=2x2"],
        "is set from ray.worker.tpu",
    ),
    (
        "saxml hosts do not match",
        ["saxml.enabled=true", "saxml.modelServer.tpu.hostsPerSlice=4"],
        "saxml.modelServer.tpu.hostsPerSlice: 4 hosts x 4 chips is not the 32 chips",
    ),
    (
        "saxml without a bucket",
        [
            "saxml.enabled=true",
            "ray.enabled=false",
            "global.gcsfuse.enabled=false",
            "global.gcsfuse.bucketName=",
        ],
        "saxml.stateBucket",
    ),
    (
        "bad digest",
        ["ray.image.digest=latest"],
        "at '/ray/image/digest': 'latest' does not match pattern",
    ),
    (
        "source range not a CIDR",
        ["saxml.http.service.loadBalancerSourceRanges={everyone}"],
        "at '/saxml/http/service/loadBalancerSourceRanges/0': 'everyone' does not match pattern",
    ),
]


@pytest.mark.parametrize(("sets", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("major", [3, 4])
def test_refuses_with_a_message_that_names_the_fix(sets, says, major):
    flags = sets if sets[0].startswith("--") else [a for s in sets for a in ("--set", s)]
    err = refused(*BUCKET, *flags, major=major)
    assert says in err


def test_every_case_has_its_own_message():
    assert len({c[2] for c in CASES}) == len(CASES) >= 15


def test_all_template_refusals_come_at_once():
    err = refused(
        *BUCKET,
        "--set",
        "ray.worker.tpu.hostsPerSlice=3",
        "--set",
        "ray.worker.tpu.machineType=x",
        "--set",
        "global.serviceAccount.create=false",
    )
    assert err.count("\n  - ") == 3 and "VALUES REFUSED" in err
