"""TorchTPU's slice variables as the launcher sets them on Ray's workers (launcher.runtime.
torch_tpu_env) beside what the torch image's pinned torch-tpu derives itself for the same hosts
(its `set_tpu_launch_env`, run in the venv `make torch-tpu` makes: it runs on a CPU, where it
counts no chips), for worker pods whose variables are those the KubeRay TPU webhook sets."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from harness.paths import REPO
from launcher.core.tpu.table import SliceShape, tpu_type
from launcher.runtime.torch.tpu_env import (
    ADDRESSES,
    TOPOLOGY,
    free_ports,
    one_host_slices,
    slice_env,
    this_worker,
)

LOCK = REPO / "images" / "launcher" / "requirements-torch.lock"
VERSION = re.search(r"^torch-tpu==(\S+)", LOCK.read_text(), re.M).group(1)  # type: ignore[union-attr]
TORCH_TPU_PYTHON = REPO / ".tools" / f"torch-tpu-{VERSION}" / "bin" / "python"

CLUSTER, GROUP = "tpu-stack", "tpu-group"

pytestmark = pytest.mark.image


def webhook_env(replica: int, host: int, hosts: int) -> dict[str, str]:
    """A TPU worker's variables as the KubeRay TPU webhook sets them (ai-on-gke/kuberay-tpu-
    webhook main.go at ef658db, mutatePod and genDNSHostnames, the same at v1.3.5): the slice's
    hostnames `<group>-<replica>-<host>.<cluster>-headless` on a multi-host slice only, the
    host's TPU_WORKER_ID (on Ironwood, per TPU container: the chart's pods have one), TPU_NAME
    `<group>-<replica>`. Neither of TorchTPU's variables."""
    env = {"TPU_WORKER_ID": str(host), "TPU_NAME": f"{GROUP}-{replica}"}
    if hosts > 1:
        names = [f"{GROUP}-{replica}-{h}.{CLUSTER}-headless" for h in range(hosts)]
        env["TPU_WORKER_HOSTNAMES"] = ",".join(names)
    return env


# Run by the pinned torch-tpu's python: imported once, each case in a child of its own (TorchTPU
# reads its variables once a process). TORCH_TPU_TOPOLOGY comes set, as the launcher sets it:
# TorchTPU keeps a value set from outside, and without chips it detects none.
TORCH_TPU_SAYS = """
import json, os, sys
from torch_tpu._internal.distributed import distributed as d
said = []
for case in json.loads(sys.argv[1]):
    read, write = os.pipe()
    if os.fork() == 0:
        os.environ.update(case["env"])
        d.set_tpu_launch_env(**case["launch"])
        topology = os.environ["TORCH_TPU_TOPOLOGY"]
        os.write(write, json.dumps({
            "addresses": os.environ["TORCH_TPU_SLICEBUILDER_ADDRESSES"],
            "topology": topology,
            "node_rank": os.environ.get("NODE_RANK"),
            "mesh": d._parse_topology(topology),
            "hosts": len(d._get_slice_host_coordinates(topology)),
        }).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        said.append(json.loads(f.read()))
    os.wait()
print("SAYS=" + json.dumps(said))
"""


def torch_tpu_says(cases: list[dict]) -> list[dict]:
    """What the pinned torch-tpu derives for each case ({"env": ..., "launch": its kwargs})."""
    if not TORCH_TPU_PYTHON.exists():
        pytest.fail(f"{TORCH_TPU_PYTHON} is missing: run `make torch-tpu` (make test does)")
    base = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    proc = subprocess.run(
        [str(TORCH_TPU_PYTHON), "-c", TORCH_TPU_SAYS, json.dumps(cases)],
        env=base,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("SAYS=")]
    return json.loads(line.removeprefix("SAYS="))


def launcher_env(shape: SliceShape, slices: int) -> list[dict[str, str]]:
    """The launcher's variables per rank, Ray's ranks running host by host, slice by slice."""
    workers = [
        this_worker(f"10.0.{s}.{h}", webhook_env(s, h, shape.hosts))
        for s in range(slices)
        for h in range(shape.hosts)
        for _ in range(shape.chips_per_host)
    ]
    ports = {name: free_ports(len(ranks)) for name, ranks in one_host_slices(workers).items()}
    return slice_env(workers, shape.topology, ports)


# (slice, slices, the mesh TorchTPU must read); and each case's host checked: the last host of
# the last slice (TorchTPU's list is one for all its hosts; its NODE_RANK is that host's).
MULTI_HOST = [("v6e-16", 1, [4, 4, 1]), ("v6e-16", 2, [4, 4, 1]), ("tpu7x-16", 1, [2, 2, 2])]


def _checked(name: str, slices: int) -> tuple[int, int]:
    return slices - 1, tpu_type(name).hosts - 1


@pytest.fixture(scope="module")
def said() -> dict:
    """TorchTPU's own derivation for every case of this module, in one run of its python."""
    cases, keys = [], []
    for name, slices, _ in MULTI_HOST:
        shape = tpu_type(name)
        s, h = _checked(name, slices)
        # JOB_COMPLETION_INDEX: the host index TorchTPU falls back to for NODE_RANK where it
        # reads no chip coordinates (an Indexed Job's; the addresses do not use it).
        # TORCH_TPU_DEVICES_PER_HOST: the chips it would count on the host.
        env = webhook_env(s, h, shape.hosts) | {
            "JOB_COMPLETION_INDEX": str(h),
            "TORCH_TPU_DEVICES_PER_HOST": str(shape.chips_per_host),
            TOPOLOGY: launcher_env(shape, slices)[0][TOPOLOGY],
        }
        cases.append({"env": env, "launch": {}})
        keys.append((name, slices))
    one_host = tpu_type("v6e-8")
    env = webhook_env(0, 0, 1) | {TOPOLOGY: launcher_env(one_host, 1)[0][TOPOLOGY]}
    cases.append({"env": env, "launch": {"nproc_per_node": one_host.chips}})
    keys.append(("v6e-8", 1))
    return dict(zip(keys, torch_tpu_says(cases), strict=True))


@pytest.mark.parametrize(("name", "slices", "mesh"), MULTI_HOST)
def test_a_multi_host_slices_variables_are_those_torch_tpu_derives(said, name, slices, mesh):
    shape = tpu_type(name)
    ours = launcher_env(shape, slices)
    assert len(ours) == slices * shape.chips
    says = said[(name, slices)]
    s, h = _checked(name, slices)
    rank = (s * shape.hosts + h) * shape.chips_per_host
    for r in range(s * shape.chips, (s + 1) * shape.chips):  # every rank of that slice
        assert ours[r][ADDRESSES] == says["addresses"], (name, s, r)
    assert says["node_rank"] == str(h) and ours[rank][TOPOLOGY] == says["topology"]
    # TorchTPU reads our topology as the slice's mesh, and lays out its hosts as the slice has
    # them (it ranks hosts by their place in that mesh).
    assert says["mesh"] == mesh and says["hosts"] == shape.hosts
    for s in range(slices):
        first = ours[s * shape.chips][ADDRESSES].split(",")
        assert len(first) == shape.chips == len(set(first))
        assert first[0] == f"{GROUP}-{s}-0.{CLUSTER}-headless:8070"
    if slices > 1:  # each slice's own list: its hosts only
        assert ours[0][ADDRESSES] != ours[-1][ADDRESSES]


def test_a_one_host_slices_variables_are_of_torch_tpus_form(said):
    """v6e-8: one host of 8 chips, no hostnames from the webhook: `localhost:<free port>` per
    chip, ports distinct, as TorchTPU's own pick; its topology the host's 2x4 mesh."""
    ours = launcher_env(tpu_type("v6e-8"), 1)
    assert len({e[ADDRESSES] for e in ours}) == 1  # the same list on every rank
    says = said[("v6e-8", 1)]
    form = re.compile(r"localhost:\d+")
    for addresses in (ours[0][ADDRESSES], says["addresses"]):
        parts = addresses.split(",")
        assert len(parts) == 8 == len(set(parts)) and all(form.fullmatch(p) for p in parts)
    assert says["mesh"] == [2, 4, 1] and says["topology"] == ours[0][TOPOLOGY]
