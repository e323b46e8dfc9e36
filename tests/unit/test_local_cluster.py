"""The simulated hosts `tpu-launcher up` starts: what a real TPU host advertises to Ray, and how
long `up` waits for each to register."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from launcher.client.local.layout import MAX_SIMULATED_HOSTS, host_nodes
from launcher.client.local.nodes import wait_until_registered
from launcher.core.errors import UsageError

pytestmark = pytest.mark.unit


def _slice_labels(node: dict) -> tuple:
    labels = node["labels"]
    return (labels["ray.io/tpu-pod-type"], labels["ray.io/tpu-topology"],
            labels["ray.io/tpu-worker-id"])  # fmt: skip


def test_the_default_is_a_v5p_16_with_the_slice_head_on_worker_0():
    nodes = host_nodes(None, None, 1, None, None)
    assert [_slice_labels(n) for n in nodes] == [("v5p-16", "2x2x2", "0"), ("v5p-16", "2x2x2", "1")]
    assert nodes[0]["resources"] == {"TPU": 4, "accelerator_type:TPU-V5P": 1, "TPU-v5p-16-head": 1}
    assert "TPU-v5p-16-head" not in nodes[1]["resources"]
    assert nodes[1]["env"]["XLA_FLAGS"] == "--xla_force_host_platform_device_count=4"


def test_any_named_multi_host_slice_the_machine_can_hold():
    nodes = host_nodes(None, None, 2, None, None, tpu="v4-16")
    assert [_slice_labels(n) for n in nodes] == [("v4-16", "2x2x2", w) for w in "0101"]
    assert {n["labels"]["ray.io/tpu-slice-name"] for n in nodes} == {
        "local-slice-0", "local-slice-1"}  # fmt: skip
    assert host_nodes(None, None, 1, None, None, tpu="v6e-16")[0]["resources"]["TPU"] == 4


def test_an_ironwood_host_counts_chips_for_ray_and_devices_for_jax():
    """A tpu7x pod asks for google.com/tpu: 4 and Ray counts TPU per chip (ray#64058: per
    device only with RAY_TPU_RESOURCE_PER_CHIP); Ray names the generation v7x (TPU-V7X,
    pod type v7x-16); JAX sees each chip's two TensorCores as devices: 8 per host."""
    nodes = host_nodes(None, None, 1, None, None, tpu="tpu7x-16")
    assert [_slice_labels(n) for n in nodes] == [("v7x-16", "2x2x2", "0"), ("v7x-16", "2x2x2", "1")]
    assert nodes[0]["resources"] == {"TPU": 4, "accelerator_type:TPU-V7X": 1, "TPU-v7x-16-head": 1}
    assert {n["env"]["XLA_FLAGS"] for n in nodes} == {"--xla_force_host_platform_device_count=8"}
    with pytest.raises(UsageError) as err:
        host_nodes(None, None, 1, None, None, tpu="tpu7x-128")
    assert "--tpu=tpu7x-16" in str(err.value)


def test_a_slice_too_large_to_simulate_names_one_that_fits():
    with pytest.raises(UsageError, match=f"at most {MAX_SIMULATED_HOSTS}") as err:
        host_nodes(None, None, 1, None, None, tpu="v6e-256")
    assert "--tpu=v6e-16" in str(err.value)
    with pytest.raises(UsageError, match="unknown TPU type 'v6e-15'"):
        host_nodes(None, None, 1, None, None, tpu="v6e-15")


def test_multi_slice_hosts_declare_the_slice_count_as_the_charts_pods_do():
    two = host_nodes(None, None, 2, None, None)
    assert {n["env"]["MEGASCALE_NUM_SLICES"] for n in two} == {"2"}
    assert [n["env"]["TPU_NAME"] for n in two] == ["local-slice-0"] * 2 + ["local-slice-1"] * 2
    assert "MEGASCALE_NUM_SLICES" not in host_nodes(None, None, 1, None, None)[0]["env"]


def test_a_second_checkout_neither_uses_nor_stops_another_checkouts_cluster(tmp_path, monkeypatch):
    """The cluster's record names the directory `up` ran in; from another directory `up` and
    `down` refuse with the way out, and `down --force` goes ahead. (The running cluster is a
    stand-in here: its record file and a dashboard that answers; the e2e tier runs real ones.)"""
    from launcher.client.local import cluster as local_cluster
    from launcher.client.local.cluster import LocalClusterSpec, down, up

    record = tmp_path / "nodes.json"
    record.write_text('{"nodes": [], "started_from": "/home/someone/other-checkout"}')
    monkeypatch.setattr(local_cluster, "nodes_file", lambda: record)
    monkeypatch.setattr(local_cluster, "is_running", lambda: True)
    monkeypatch.chdir(tmp_path)
    stopped = []
    monkeypatch.setattr(local_cluster, "stop_processes", lambda: stopped.append("stop") or 0)
    for call in (lambda: up(LocalClusterSpec()), lambda: down()):
        with pytest.raises(UsageError) as refused:
            call()
        assert "started from /home/someone/other-checkout" in str(refused.value)
        assert "tpu-launcher down --force" in refused.value.fix
    assert stopped == []
    down(force=True)
    assert stopped == ["stop"]

    record.write_text(f'{{"nodes": [], "started_from": "{tmp_path}"}}')
    up(LocalClusterSpec())  # this directory's own: used as it is
    down()
    (tmp_path / "scripts").mkdir()
    monkeypatch.chdir(tmp_path / "scripts")  # the project's subdirectory: still its own
    up(LocalClusterSpec())
    down()
    assert stopped == ["stop", "stop", "stop"]


def _stand_in_raylet(log: Path, lines: str, seconds: float) -> subprocess.Popen:
    """A process in a raylet's place (a real one needs a cluster: the e2e tier starts those):
    it writes `lines` to its stdout, a file as a raylet's is, and runs for `seconds`."""
    script = f"import sys, time; print({lines!r}, flush=True); time.sleep({seconds})"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=out)
    deadline = time.monotonic() + 30
    while not log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc


@pytest.mark.timeout(120)
def test_a_node_whose_raylet_exited_fails_at_once_with_the_end_of_its_log(tmp_path):
    """`ray start` gave up on the node; its raylet then exited (here: in 2 s), so it will never
    register: the wait stops then, not at its limit, and shows why from the raylet's log."""
    log = tmp_path / "raylet.3.out"
    raylet = _stand_in_raylet(log, "Failed to bind port 52412: Address already in use", 2)
    started = time.monotonic()
    with pytest.raises(UsageError) as e:
        wait_until_registered("local-slice-7-host-0", 600, psutil.Process(raylet.pid))
    raylet.wait()
    assert time.monotonic() - started < 60  # not the 600 s limit
    message = str(e.value)
    assert "Ray node local-slice-7-host-0's raylet exited before it registered" in message
    assert f"({log})" in message and "Address already in use" in message
    assert str(log) in e.value.fix and "tpu-launcher up" in e.value.fix
    with pytest.raises(UsageError, match="raylet exited"):  # none found: nothing to wait for
        wait_until_registered("local-slice-7-host-0", 600, None)


def test_a_node_that_runs_but_never_registers_is_waited_for_until_the_limit(tmp_path):
    log = tmp_path / "raylet.4.out"
    raylet = _stand_in_raylet(log, "Registering with the GCS at 127.0.0.2:6379", 60)
    try:
        with pytest.raises(UsageError) as e:
            wait_until_registered("local-slice-8-host-0", 3, psutil.Process(raylet.pid))
    finally:
        raylet.kill()
        raylet.wait()
    assert "Ray node local-slice-8-host-0 did not register" in str(e.value)
    assert "within 3 s" in str(e.value) and "Registering with the GCS" in str(e.value)
    assert "tpu-launcher up" in e.value.fix


def _sleeper(env: dict[str, str]) -> subprocess.Popen:
    """A process standing in for one of a cluster's (or a client's), with `env` added."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], env={**os.environ, **env}
    )


def test_down_stops_its_own_slots_processes_and_no_one_elses(monkeypatch):
    """Two local clusters side by side (a user's and the tests'): `down` of one stops each
    process started as a member of its slot, and no process of the other slot, nor a client
    that only names the slot (a pytest worker, a `tpu-launcher` command). Stand-in processes:
    the e2e tier runs real clusters."""
    from launcher.client.local import cluster as local_cluster
    from launcher.client.local.instance import MEMBER_ENV, SLOT_ENV

    monkeypatch.setenv(SLOT_ENV, "7")
    mine = _sleeper(local_instance_env(7))
    other = _sleeper(local_instance_env(8))
    client = _sleeper({SLOT_ENV: "7"})
    try:
        assert local_cluster.stop_processes() == 1
        assert mine.wait(timeout=30) is not None
        assert other.poll() is None and client.poll() is None
        assert local_cluster.stop_processes() == 0  # nothing left of slot 7; slot 8 untouched
        assert other.poll() is None
    finally:
        for proc in (mine, other, client):
            proc.kill()
            proc.wait()
    assert MEMBER_ENV not in os.environ  # this process is a client of the tests' cluster


def local_instance_env(slot: int) -> dict[str, str]:
    from launcher.client.local.instance import LocalInstance

    return LocalInstance(slot).env


def test_each_slot_has_ports_and_a_state_directory_of_its_own(monkeypatch):
    from launcher.client.local.instance import MAX_SLOT, RAY_TMPDIR, LocalInstance, local_instance

    monkeypatch.delenv(RAY_TMPDIR, raising=False)
    slots = [LocalInstance(k) for k in range(MAX_SLOT + 1)]
    ports = [
        {s.head_port, s.dashboard_port, s.client_port, s.prometheus_port}
        | {int(a.rpartition("=")[2]) for i in range(9) for a in s.node_ports(i)}
        for s in slots
    ]
    every = [p for group in ports for p in group]
    assert len(every) == len(set(every))  # no two slots (nor two nodes) share a port
    ray_workers = range(10002, 20000)  # Ray's default worker ports, on every node
    assert not [p for p in every if p in ray_workers]
    assert slots[0].head_port == 6379 and slots[0].dashboard_address.endswith(":8265")
    assert len({s.ray_dir for s in slots}) == len(slots)
    monkeypatch.setenv("LAUNCHER_LOCAL_SLOT", "12")
    with pytest.raises(UsageError, match="LAUNCHER_LOCAL_SLOT"):
        local_instance()


def test_a_host_is_killed_in_its_own_slot_only(monkeypatch):
    """Both clusters have a host named local-slice-0-host-1: a preemption the tests inject into
    theirs must not take the user's. (Stand-in processes, as above.)"""
    from launcher.client.local.instance import SLOT_ENV
    from launcher.client.local.layout import HOST_ENV
    from launcher.client.local.nodes import kill_hosts

    monkeypatch.setenv(SLOT_ENV, "7")
    host = {HOST_ENV: "local-slice-0-host-1"}
    ours = _sleeper({**local_instance_env(7), **host})
    theirs = _sleeper({**local_instance_env(8), **host})
    try:
        assert kill_hosts({"local-slice-0-host-1"}) == 1
        assert ours.wait(timeout=30) is not None and theirs.poll() is None
    finally:
        for proc in (ours, theirs):
            proc.kill()
            proc.wait()


def test_a_job_command_naming_no_cluster_means_this_directorys_and_says_whose(
    tmp_path, monkeypatch, capsys
):
    """No --address or --release: submit and stop refuse a local cluster `up` started from
    another directory (its jobs would write to that directory's bucket), naming where it was
    started; list, status and logs read it and say whose it is; every one says which cluster
    first. (The running cluster is a stand-in: its record and an answering dashboard.)"""
    from launcher import cli
    from launcher.client.jobs.ray_api import resolve_dashboard
    from launcher.client.local import cluster as local_cluster

    for variable in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"):
        monkeypatch.delenv(variable, raising=False)
    owner = tmp_path / "clone"
    (owner / "examples").mkdir(parents=True)
    record = tmp_path / "nodes.json"
    record.write_text(json.dumps({"nodes": [], "started_from": str(owner), "bucket": "/b"}))
    monkeypatch.setattr(local_cluster, "nodes_file", lambda: record)
    monkeypatch.setattr(local_cluster, "is_running", lambda: True)
    elsewhere = tmp_path / "my-project"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    address = local_cluster.local_instance().dashboard_address

    for argv in (["submit", "--", "run_name=r"], ["stop", "some-job"]):
        assert cli.main(argv) == 2, argv
        said = capsys.readouterr().err
        assert f"started from {owner}, not from this directory" in said, (argv, said)
        assert "its bucket (/b)" in said and f"--address {address}" in said, said
    assert resolve_dashboard(None).address == address  # reading: allowed, and said
    assert f"started from {owner}, not from this directory" in capsys.readouterr().err
    assert resolve_dashboard(address, acting=True).address == address  # named: as named

    for here in (owner, owner / "examples"):  # its own directory, or one inside it
        monkeypatch.chdir(here)
        assert resolve_dashboard(None, acting=True).address == address
        said = capsys.readouterr().err
        assert said.startswith(f"cluster: the local Ray cluster at {address}, started here"), said
