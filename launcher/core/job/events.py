"""What a job says to the workstation: one format and one parse per tagged line, here.

The job (rank 0, the driver) writes these lines into its log; Ray relays them; `submit` parses
each back with `parse` and decides what the terminal shows by the event's kind, never by
matching text of its own. A new event is a format function, a pattern in `_PATTERNS` and a
case in the client's display: `tests/unit/test_job_output.py` renders every kind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    PROGRESS = "progress"  # one per step: the live display
    CHECKPOINT = "checkpoint"  # a committed save
    EVAL = "eval"  # held-out loss, when MaxText computed it (eval_interval)
    RESTART = "restart"  # the worker group started again (a failure, a resize)
    PREEMPTED = "preempted"  # the restart followed a preemption notice; where it resumed
    HANG = "hang"  # the watchdog saw no progress: what each host did last; the restart follows
    ELASTIC = "elastic"  # the slices a start got, and the global batch on them
    SUMMARY = "summary"  # the first line of a job's closing summary; the lines after it belong
    RESULT = "result"  # the machine-readable summary: the log file only
    LAUNCHER = "launcher"  # the launcher's own messages (the plan, a refusal)
    FAILURE_POLICY = "failure policy"  # Ray Train's decision; its next lines say why
    FULL_LOG = "full log"  # written by submit, first: where the whole log goes
    SCRIPT = "script"  # a line of a PyTorch script's own output (rank 0's)
    DEVICES = "devices"  # the chips' verdict (a straggler, all idle) when it changes


# The summaries a job ends with, by the job that writes them.
SUMMARY_TITLES = {
    "training": "== training finished ==",
    "generate": "== generated ==",
    "export": "== exported ==",
    "import": "== imported ==",
    "prepare": "== prepared ==",
}
_RESULT = "LAUNCHER_RESULT "
SCRIPT_MARK = "[script] "  # what marks a PyTorch script's own line (rank 0's) for the job's view
# Ray prefixes a worker's lines with "(RayTrainWorker pid=123)" (coloured on a terminal).
_RAY_PREFIX = re.compile(r"^(?:\x1b\[[0-9;]*m)?\((?P<who>[^)]*)\)(?:\x1b\[[0-9;]*m)?\s?")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FULL_LOG = "full log: "

_PATTERNS: dict[EventKind, re.Pattern[str]] = {
    EventKind.PROGRESS: re.compile(
        r"^\[progress\] step (?P<step>\d+)/(?P<total>\d+) loss (?P<loss>\S+)"
        r"(?: eval loss (?P<eval_loss>\S+))? step time "
        r"(?P<seconds>\S+)s tokens/s/device (?P<tokens>\S+)(?: TFLOP/s/device (?P<tflops>\S+))?"
        r"(?: MFU (?P<mfu>\S+))?(?: ETA (?P<eta>\S+?)s?)?$"
    ),
    EventKind.CHECKPOINT: re.compile(
        r"^\[checkpoint\] (?:saved step (?P<step>\d+)(?: to (?P<tier>memory|the bucket))?"
        r"|restored step (?P<restored>\d+) from (?P<source>.+))$"
    ),
    EventKind.EVAL: re.compile(
        r"^\[eval\] after step (?P<step>\d+): eval loss (?P<loss>\S+) perplexity "
        r"(?P<perplexity>\S+)"
    ),
    EventKind.RESTART: re.compile(r"^\[restart\] .*\(start (?P<start>\d+)\)"),
    EventKind.PREEMPTED: re.compile(r"^\[preempted\] .*resumed at step (?P<step>\d+)"),
    EventKind.HANG: re.compile(r"^\[hang\] (?P<what>.*)$"),
    EventKind.ELASTIC: re.compile(r"^\[elastic\] (?P<slices>\d+) of (?P<of>\d+) slices"),
    EventKind.SUMMARY: re.compile(
        "^(?P<title>" + "|".join(map(re.escape, SUMMARY_TITLES.values())) + ")$"
    ),
    EventKind.RESULT: re.compile("^" + re.escape(_RESULT) + r"(?P<json>\{.*\})$"),
    # The launcher's own lines; `data:` the prepare job's (its progress, its refusals).
    EventKind.LAUNCHER: re.compile(r"^(?:launcher:|tpu-launcher|data:)"),
    EventKind.FAILURE_POLICY: re.compile(r"^\[FailurePolicy\]"),
    EventKind.FULL_LOG: re.compile("^" + re.escape(_FULL_LOG) + r"(?P<path>\S+)$"),
    EventKind.SCRIPT: re.compile("^" + re.escape(SCRIPT_MARK) + r"(?P<text>.*)$"),
    EventKind.DEVICES: re.compile(
        r"^\[devices\] (?P<verdict>ok|straggler|idle):(?: (?P<hosts>[^ (;]+(?:, [^ (;]+)*) \()?"
        r".*duty cycle by host: (?P<by_host>.*)$"
    ),
}


@dataclass(frozen=True)
class JobEvent:
    kind: EventKind
    line: str
    fields: dict[str, str] = field(default_factory=dict)


def strip_colour(line: str) -> str:
    """A line without its terminal colour codes (for a pipe or a file)."""
    return _ANSI.sub("", line)


def clean(line: str) -> str:
    """A line as a person reads it: no colour codes, no Ray process prefix."""
    return _ANSI.sub("", _RAY_PREFIX.sub("", line, count=1)).rstrip()


def parse(line: str) -> JobEvent | None:
    """The event a log line is (Ray's process prefix and colours already removed), or None."""
    for kind, pattern in _PATTERNS.items():
        if m := pattern.search(line):
            fields = {k: v for k, v in m.groupdict().items() if v is not None}
            return JobEvent(kind, line, fields)
    return None


def events(log: str, kind: EventKind) -> list[JobEvent]:
    """Every event of one kind in a whole log, in order."""
    found = (parse(clean(line)) for line in log.splitlines())
    return [e for e in found if e is not None and e.kind is kind]


def format_progress(
    step: int,
    total: int,
    loss: float,
    seconds: float,
    tokens_per_device: float,
    tflops_per_device: float | None,
    mfu: float | None,
    eta_seconds: float,
    eval_loss: float | None = None,
) -> str:
    """`step` counts from 1; `mfu` is a fraction. TFLOP/s and MFU are left out where they mean
    nothing (None): TFLOP/s on CPU devices, MFU where the chip's peak is unknown; the eval loss
    until the first eval."""
    tflops = f" TFLOP/s/device {tflops_per_device:.3f}" if tflops_per_device is not None else ""
    shown_mfu = f" MFU {mfu:.1%}" if mfu is not None else ""
    shown_eval = f" eval loss {eval_loss:.4f}" if eval_loss is not None else ""
    return (
        f"[progress] step {step}/{total} loss {loss:.4f}{shown_eval} step time {seconds:.3f}s "
        f"tokens/s/device {tokens_per_device:.0f}{tflops}{shown_mfu} ETA {eta_seconds:.0f}s"
    )


def format_eval(step: int, loss: float, perplexity: float) -> str:
    """`step` as MaxText counts it (from 0): the eval ran on the weights after that step."""
    return f"[eval] after step {step}: eval loss {loss:.4f} perplexity {perplexity:.2f}"


def format_checkpoint(step: int, tier: str | None = None) -> str:
    """`tier`: where the save went, for a job with more than one
    (launcher.core.job.checkpoint_tiers; the bucket is said as such)."""
    where = {None: "", "memory": " to memory", "bucket": " to the bucket"}[tier]
    return f"[checkpoint] saved step {step}{where}"


def format_restored(step: int, source: str) -> str:
    """A start restored `step` from `source` (a slice's memory, or the bucket)."""
    return f"[checkpoint] restored step {step} from {source}"


def format_restart(start: int, workers: int, slices: int, per_chip: bool = False) -> str:
    """`workers`: one per host (MaxText), or with `per_chip` one per chip (a PyTorch script)."""
    where = f"{workers} workers, one per chip" if per_chip else f"{workers} hosts"
    who = "the script" if per_chip else "MaxText"
    return (
        f"[restart] the worker group started again (start {start}) on {where} "
        f"({slices} slice{'s' if slices > 1 else ''}); {who} resumes from the latest checkpoint"
    )


def format_preempted(
    resumed_at: int, notice_seconds: float | None, hosts: Sequence[str] = ()
) -> str:
    """The restart after a notice: which hosts went (`<slice>/<worker id>`; Ray stopped every
    rank of their slices with them, a TPU slice being taken back whole) and where it resumed."""
    notice = f"{notice_seconds:.0f} s notice" if notice_seconds is not None else "no deadline"
    if not hosts:
        return f"[preempted] a host was taken back ({notice}); resumed at step {resumed_at}"
    many = len(hosts) > 1
    went = f"host{'s' if many else ''} {', '.join(hosts)} {'were' if many else 'was'} taken back"
    with_it = "them every rank of their slices" if many else "it every rank of its slice"
    return f"[preempted] {went} ({notice}), and with {with_it}; resumed at step {resumed_at}"


def format_hang(what: str) -> str:
    return f"[hang] {what}"


def format_elastic(
    slices: int, of: int, global_batch: float, overrides: Mapping[str, object]
) -> str:
    return f"[elastic] {slices} of {of} slices: global batch {global_batch:g}" + "".join(
        f", {k}={v}" for k, v in overrides.items()
    )


def format_summary_title(job: str) -> str:
    """`job`: training, generate, export, import or prepare."""
    return SUMMARY_TITLES[job]


def format_result(record: dict[str, Any]) -> str:
    return _RESULT + json.dumps(record)


def format_full_log(path: object) -> str:
    return f"{_FULL_LOG}{path}"


def last_step(log: str) -> tuple[int, int] | None:
    """(step, total) of the job's last progress line in a log, or None."""
    if progress := events(log, EventKind.PROGRESS):
        return int(progress[-1].fields["step"]), int(progress[-1].fields["total"])
    return None


def last_result(log: str) -> dict[str, Any] | None:
    """The record of the job's last result line in a whole log, or None."""
    found = events(log, EventKind.RESULT)
    return json.loads(found[-1].fields["json"]) if found else None


def format_devices(text: str) -> str:
    """The chips' verdict (launcher.core.tpu.device_metrics.describe's text)."""
    return f"[devices] {text}"


def last_devices(log: str) -> dict[str, Any] | None:
    """The job's last `[devices]` verdict in a whole log: {verdict, hosts, line}, or None."""
    if not (found := events(log, EventKind.DEVICES)):
        return None
    event = found[-1]
    hosts = event.fields.get("hosts") or ""
    return {
        "verdict": event.fields["verdict"],
        "hosts": hosts.split(", ") if hosts else [],
        "line": event.line,
    }


def format_script(line: str) -> str:
    """A line of a PyTorch script's own output (rank 0's), marked for the job's view."""
    return SCRIPT_MARK + line


# Ray Train's account of a failed worker group (ray.train.v2 WorkerGroupPollStatus
# .get_error_string, Ray 2.60): "[Rank 4,5 Error Snippet]:" and the error's own lines, as the
# failure policy logs it after "Error: Training failed due to worker errors:".
ERROR_SNIPPET = re.compile(r"^\[Rank (?P<ranks>[\d,]+) Error Snippet\]:$")
_SNIPPET_FIELD = re.compile(r"^\s*(?P<key>pid|ip|class_name): (?P<value>\S+)")


def condense_snippet(ranks: str, lines: list[str]) -> str:
    """One line for a snippet: the ranks, the error's first line, where its worker ran (a dead
    actor's ip and pid) and the last line of its own detail (a dead worker's exit)."""
    text = [x.strip() for x in lines if x.strip()]
    if not text:
        return f"  ranks {ranks}: (no error text)"
    fields = {m["key"]: m["value"] for x in lines if (m := _SNIPPET_FIELD.match(x))}
    where = ", ".join(f"{k} {fields[k]}" for k in ("ip", "pid") if k in fields)
    rest = [x for x in text[1:] if not _SNIPPET_FIELD.match(x)]
    detail = f" {rest[-1]}" if rest else ""
    return f"  ranks {ranks}: {text[0]}{f' ({where})' if where else ''}{detail}"
