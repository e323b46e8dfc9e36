"""What `tpu-launcher submit` shows of a running job: the plan, one live progress display,
checkpoint saves, restarts and elastic resizes with their cause, and the summary. Everything else
(MaxText's config dump, library warnings, Orbax's and Ray's own lines) goes, complete and
unfiltered, to a log file per job, whose path is printed; when the job fails, the log's last
lines are shown. `--verbose` shows every line live.

What a line is comes from `launcher.core.job.events` (the job's own vocabulary); this module only
decides how each kind is shown. On a terminal the progress display redraws in place (rich); in a
pipe or a CI log it is one line per tenth of the run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from launcher.core.job.events import (
    ERROR_SNIPPET,
    EventKind,
    JobEvent,
    clean,
    condense_snippet,
    parse,
    strip_colour,
)

# Shown as they come: each is one line a person acts on.
_SHOWN = {
    EventKind.CHECKPOINT,
    EventKind.EVAL,
    EventKind.RESTART,
    EventKind.PREEMPTED,
    EventKind.HANG,
    EventKind.ELASTIC,
    EventKind.LAUNCHER,
    EventKind.SCRIPT,  # a PyTorch script's own output (rank 0's): the job is the script's
    EventKind.DEVICES,
}
FAILURE_TAIL = 40  # lines of the log shown when the job fails
SNIPPET_LINES = 12  # of a worker's error, read for its one line (the rest is in the log file)


class JobOutput:
    """Receives the job's log as it arrives (in chunks), writes all of it to `log_path` and
    shows what matters on `stream`."""

    def __init__(
        self,
        log_path: Path,
        verbose: bool = False,
        stream: TextIO | None = None,
        title: str = "training",
    ):
        self.log_path = log_path
        self.verbose = verbose
        self.stream = stream or sys.stdout
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("w")
        self._partial = ""
        self.fed = 0  # characters received so far
        self._in_summary = False
        self._failure_lines = 0  # Ray Train's failure decision: its next lines say why
        # A worker's error snippet being read (its ranks, its lines so far), shown as one line.
        self._snippet: tuple[str, list[str]] | None = None
        self._last_shown_step = 0
        self._bar = None
        if not verbose and self.stream.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(
                TextColumn(f"[bold]{title}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                transient=False,
            )
            self._task = self._bar.add_task("starting", total=None)
            self._bar.start()

    def feed(self, chunk: str) -> None:
        self.fed += len(chunk)
        text = self._partial + chunk
        *lines, self._partial = text.split("\n")
        for line in lines:
            self._line(line)

    def close(self) -> None:
        if self._partial:
            self._line(self._partial)
            self._partial = ""
        self._end_snippet()
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        self._log.close()

    def failure_tail(self) -> list[str]:
        """The log's last lines, without the progress lines: where a failing host said why."""
        lines = [clean(x) for x in self.log_path.read_text().splitlines()]
        return [x for x in lines if x and not _is_progress(x)][-FAILURE_TAIL:]

    def _line(self, raw: str) -> None:
        self._log.write(raw + "\n")
        self._log.flush()
        if self.verbose:
            self._show(raw if self.stream.isatty() else strip_colour(raw))
            return
        line = clean(raw)
        if self._snippet is not None and self._in_snippet(line):
            return
        if not line:
            return
        if found := ERROR_SNIPPET.match(line):  # why a worker failed: one line of it below
            self._snippet = (found["ranks"], [])
            return
        event = parse(line)
        kind = event.kind if event else None
        if kind is EventKind.PROGRESS:
            assert event is not None
            self._progress(event)
        elif kind is EventKind.SUMMARY:
            self._in_summary = True
            self._show("")
            self._show(line)
        elif kind is EventKind.RESULT:
            self._in_summary = False  # machine-readable: in the log file only
        elif kind is EventKind.FAILURE_POLICY:
            self._failure_lines = 3
            self._show(line)
        elif self._in_summary or kind in _SHOWN:
            self._show(line)
        elif self._failure_lines:
            self._failure_lines -= 1
            self._show(line)

    def _in_snippet(self, line: str) -> bool:
        """Takes `line` into the snippet being read; False where the snippet ended before it."""
        assert self._snippet is not None
        lines = self._snippet[1]
        ends = not line or line.startswith("Traceback") or ERROR_SNIPPET.match(line) or parse(line)
        if ends or len(lines) >= SNIPPET_LINES:
            self._end_snippet()
            return False
        lines.append(line)
        return True

    def _end_snippet(self) -> None:
        if self._snippet is not None:
            self._show(condense_snippet(*self._snippet))
            self._snippet = None

    def _progress(self, event: JobEvent) -> None:
        f = event.fields
        step, total = int(f["step"]), int(f["total"])
        if self._bar is not None:
            extra = f" MFU {f['mfu']}" if "mfu" in f else ""
            self._bar.update(
                self._task,
                completed=step,
                total=total,
                description=f"loss {f['loss']}  {f['seconds']}s/step  "
                f"{f['tokens']} tokens/s/device{extra}  ETA {f.get('eta', '?')}s",
            )
            return
        every = max(1, total // 10)
        if step == total or step - self._last_shown_step >= every:
            self._last_shown_step = step
            self._show(event.line)

    def _show(self, line: str) -> None:
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.stream, flush=True)


def _is_progress(line: str) -> bool:
    event = parse(line)
    return event is not None and event.kind is EventKind.PROGRESS
