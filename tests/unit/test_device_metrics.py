"""The chips' figures: the local cluster's device plugin STAND-IN serves what Ray's own agent
parses (its real `_get_tpu_usage`, pointed at the stand-in as TPU_DEVICE_PLUGIN_ADDR points it
on GKE), the driver reads the agent's export back per host, and judges a straggler or every host
idle; the `[devices]` line reads back as `status` shows it."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import pytest

from launcher.client.local import device_plugin
from launcher.client.local.device_plugin import SimulatedChips, handler
from launcher.core.job.events import format_devices, last_devices
from launcher.core.tpu.device_metrics import (
    IDLE,
    OK,
    STRAGGLER,
    HostDevices,
    Verdict,
    describe,
    judge,
)
from launcher.runtime.job.device_watch import DeviceWatch, host_devices

pytestmark = pytest.mark.unit

CHIPS = SimulatedChips("local-slice-0-host-1", 0, 1, 4, "tpu-v5p-slice", "2x2x2", 95 * 2**30)


def hosts(*duty: float) -> list[HostDevices]:
    return [HostDevices(f"s/{i}", 4, d, d, 1e9, 4e10) for i, d in enumerate(duty)]


def test_one_host_idle_while_the_others_work_is_a_straggler():
    assert judge(hosts(80, 2, 75), steps_stalled=False) == Verdict(STRAGGLER, ("s/1",))
    assert judge(hosts(80, 2, 75), steps_stalled=True) == Verdict(STRAGGLER, ("s/1",))
    assert judge(hosts(80, 60, 75), steps_stalled=False) == Verdict(OK)
    assert judge(hosts(10, 1), steps_stalled=False) == Verdict(OK)  # the others not busy
    assert judge(hosts(2), steps_stalled=True) == Verdict(IDLE)  # one host: idle, no straggler


def test_every_host_idle_is_a_hang_only_while_steps_stall():
    assert judge(hosts(1, 0, 2), steps_stalled=True) == Verdict(IDLE)
    assert judge(hosts(1, 0, 2), steps_stalled=False) == Verdict(OK)  # a save, an eval


def test_the_devices_line_reads_back_as_status_shows_it():
    line = format_devices(describe(Verdict(STRAGGLER, ("s/1",)), hosts(80, 2, 75)))
    assert last_devices("other\n" + line + "\n") == {
        "verdict": STRAGGLER,
        "hosts": ["s/1"],
        "line": line,
    }
    assert "s/0 80%, s/1 2%, s/2 75%" in line and "at 78%" in line
    idle = format_devices(describe(Verdict(IDLE), hosts(1, 0)))
    assert last_devices(line + "\n" + idle) == {"verdict": IDLE, "hosts": [], "line": idle}
    assert last_devices("[progress] nothing") is None


class Usage:
    """What the stand-in measures of a host's workers, as the test sets it."""

    def __init__(self, busy_pct: float):
        self.busy_pct, self.rss_bytes = busy_pct, 8 * 2**30

    def sample(self) -> None:
        pass


@pytest.fixture
def stand_in(tmp_path):
    """The stand-in serving CHIPS on a free port, its workers busy 42% of the time."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(CHIPS, Usage(42.0), tmp_path))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_rays_own_agent_parses_the_stand_in_as_a_device_plugin(stand_in, tmp_path, monkeypatch):
    from ray.dashboard.modules.reporter import reporter_agent

    monkeypatch.setattr(reporter_agent, "TPU_DEVICE_PLUGIN_ADDR", f"127.0.0.1:{stand_in}")
    monkeypatch.setattr(reporter_agent, "enable_tpu_usage_check", True)
    chips = reporter_agent.ReporterAgent._get_tpu_usage()
    # Four chips, each host-indexed 0-3 (the agent maps the slice-indexed 4-7 onto them).
    assert [c["index"] for c in chips] == [0, 1, 2, 3]
    for chip in chips:
        assert chip["duty_cycle"] == chip["tensorcore_utilization"] == 42.0
        assert chip["memory_used"] == 2 * 2**30 and chip["memory_total"] == 95 * 2**30
        assert (chip["tpu_type"], chip["tpu_topology"]) == ("tpu-v5p-slice", "2x2x2")
    # Held idle by `idle-chips`: 0 whatever the CPU did.
    device_plugin.holds_dir(tmp_path).mkdir()
    (device_plugin.holds_dir(tmp_path) / CHIPS.host).touch()
    monkeypatch.setattr(reporter_agent, "enable_tpu_usage_check", True)
    assert {c["duty_cycle"] for c in reporter_agent.ReporterAgent._get_tpu_usage()} == {0.0}


# What Ray 2.60's agent exports for a host's chip (its metrics port), one sample per series.
AGENT_TEXT = (
    "\n".join(
        f'ray_tpu_{name}{{IsHeadNode="false",SessionName="s",TpuIndex="{i}",ip="10.0.0.5"}} {value}'
        for i in range(4)
        for name, value in (
            ("duty_cycle", 60 + i),
            ("tensorcore_utilization", 30),
            ("memory_used", 2e9),
            ("memory_total", 95e9),
        )
    )
    + '\nray_node_cpu_utilization{ip="10.0.0.5"} 12\n'
)


def test_the_driver_reads_a_hosts_chips_from_its_agents_export():
    found = host_devices("v6e-16-a/2", AGENT_TEXT)
    assert found == HostDevices("v6e-16-a/2", 4, 61.5, 30.0, 8e9, 380e9)
    assert host_devices("v6e-16-a/2", 'ray_node_cpu_utilization{ip="x"} 1\n') is None


def test_the_watch_waits_for_a_first_step_and_for_two_readings_that_agree():
    said: list[str] = []
    readings = iter(
        [hosts(80, 1), hosts(80, 1), hosts(80, 70), hosts(0, 1), hosts(0, 1), hosts(0, 1)]
    )
    steps = iter([None, 3, 4, 5, 6, 6, 6])
    watch = DeviceWatch(lambda: next(steps), said.append, lambda: next(readings))
    watch.check()  # no step yet: compiling; nothing read
    assert said == []
    watch.check()  # a straggler seen once: not yet said
    assert said == []
    watch.check()  # and again: said
    assert len(said) == 1 and last_devices(said[0])["hosts"] == ["s/1"]
    watch.check()  # back to normal: said at once
    assert last_devices(said[-1])["verdict"] == OK
    watch.check()  # every host idle, but the step moved on (6 after 5)
    assert len(said) == 2
    watch.check()  # idle and stalled: once, not yet said
    assert len(said) == 2
    watch.check()  # idle and stalled again: a hang
    assert last_devices(said[-1])["verdict"] == IDLE
