"""The driver's watch on the chips: every WATCH_EVERY_S it reads each TPU host's Ray agent (its
metrics port: the `ray_tpu_*` series the agent scraped from the host's device plugin), judges
them with whether steps still finish (launcher.core.tpu.device_metrics), and writes a `[devices]`
line to the job's log whenever the verdict changes: the first reading after a start's first
step, a straggler named, every host idle while steps stall, and back to normal. `status` shows
the last one. The hang watchdog (launcher.runtime.train.hang_watchdog) still decides a restart on
its own bound; the idle verdict says, earlier, what the chips were doing.

Hosts whose agent exports no TPU series (no device plugin named to them: a CPU slice, a pod the
TPU webhook did not mutate) are left out; with none, the watch says nothing."""

from __future__ import annotations

import logging
import urllib.request
from collections import defaultdict
from collections.abc import Callable

from launcher.core.job.events import format_devices
from launcher.core.tpu.device_metrics import (
    DUTY_CYCLE,
    MEMORY_TOTAL,
    MEMORY_USED,
    OK,
    RAY_CHIP_LABEL,
    RAY_NAMES,
    TENSORCORE_UTILIZATION,
    HostDevices,
    Verdict,
    describe,
    judge,
)
from launcher.core.tpu.slices import host_name
from launcher.runtime.periodic import every

WATCH_EVERY_S = 15.0
READ_TIMEOUT_S = 5.0
_BY_RAY_NAME = {ray_name: name for name, ray_name in RAY_NAMES.items()}

log = logging.getLogger(__name__)


def tpu_hosts() -> list[tuple[str, str]]:
    """(`<slice>/<worker id>`, metrics URL) of each live TPU host, from Ray's nodes."""
    import ray

    found = []
    for node in ray.nodes():
        labels = node.get("Labels") or {}
        host = host_name(labels)
        if node.get("Alive") and host is not None and node.get("MetricsExportPort"):
            url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
            found.append((host, url))
    return sorted(found)


def host_devices(host: str, text: str) -> HostDevices | None:
    """One host's chips from its agent's exposition (None: it exports no TPU series)."""
    from prometheus_client.parser import text_string_to_metric_families

    chips: dict[str, dict[str, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (name := _BY_RAY_NAME.get(sample.name)) is not None:
                chips[sample.labels.get(RAY_CHIP_LABEL, "")][name] = sample.value
    if not chips:
        return None
    values = list(chips.values())

    def mean(name: str) -> float:
        return sum(c.get(name, 0.0) for c in values) / len(values)

    return HostDevices(
        host,
        len(values),
        mean(DUTY_CYCLE),
        mean(TENSORCORE_UTILIZATION),
        sum(c.get(MEMORY_USED, 0.0) for c in values),
        sum(c.get(MEMORY_TOTAL, 0.0) for c in values),
    )


def read_hosts() -> list[HostDevices]:
    found = []
    for host, url in tpu_hosts():
        try:
            with urllib.request.urlopen(url, timeout=READ_TIMEOUT_S) as response:
                text = response.read().decode()
        except OSError as e:  # a host going away: judged on the others
            log.debug("could not read %s's agent at %s: %s", host, url, e)
            continue
        if (devices := host_devices(host, text)) is not None:
            found.append(devices)
    return found


class DeviceWatch:
    """`last_step()`: the latest step the current start finished (None: none yet). Nothing is
    judged before a start's first step; a verdict other than OK is said once two readings in a
    row agree."""

    def __init__(
        self,
        last_step: Callable[[], int | None],
        say: Callable[[str], None] = lambda line: print(line, flush=True),
        read: Callable[[], list[HostDevices]] = read_hosts,
    ):
        self.last_step, self.say, self.read = last_step, say, read
        self.verdict: Verdict | None = None
        self._candidate: Verdict | None = None
        self._step_seen: int | None = None
        self._stop: Callable[[], None] | None = None

    def check(self) -> None:
        step = self.last_step()
        if step is None:  # compiling, restoring: the chips wait on the hosts' CPUs
            self._step_seen = self._candidate = None
            return
        hosts = self.read()
        if not hosts:
            return
        stalled, self._step_seen = step == self._step_seen, step
        verdict = judge(hosts, stalled)
        if verdict == self.verdict:
            self._candidate = None
            return
        if verdict.kind != OK and verdict != self._candidate:
            self._candidate = verdict  # said when the next reading agrees: not one blip
            return
        self.verdict, self._candidate = verdict, None
        self.say(format_devices(describe(verdict, hosts)))

    def start(self) -> DeviceWatch:
        stop = every(WATCH_EVERY_S, self._check_quietly, "device-watch")
        self._stop = stop.set
        return self

    def _check_quietly(self) -> None:
        try:
            self.check()
        except Exception as e:  # a watch must never fail the job
            log.warning("launcher: the device watch could not read the chips: %s", e)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
