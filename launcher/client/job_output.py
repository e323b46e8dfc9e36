"""What `make submit` shows of a running job: the plan, one live progress display, checkpoint
saves, restarts and their cause, and the summary. Everything else (MaxText's config dump,
library warnings, Orbax's and Ray's own lines) goes, complete and unfiltered, to a log file per
job, whose path is printed; when the job fails, the log's last lines are shown. VERBOSE=1 shows
every line live.

On a terminal the progress display redraws in place (rich); in a pipe or a CI log it is one line
per tenth of the run.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TextIO

from launcher.core.job_plan import RESULT_MARK
from launcher.core.progress_line import PROGRESS_LINE
from launcher.core.run_requests import EXPORTED_MARK, GENERATED_MARK

# Ray prefixes a worker's lines with "(RayTrainWorker pid=123)" (coloured on a terminal).
_RAY_PREFIX = re.compile(r"^(?:\x1b\[[0-9;]*m)?\((?P<who>[^)]*)\)(?:\x1b\[[0-9;]*m)?\s?")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The lines always shown, by how they start once Ray's prefix is gone.
_SHOWN = ("launcher:", "tpu-launcher", "[checkpoint]", "[restart]", "[FailurePolicy]")
# The summaries a job ends with (training's, generation's, export's): shown whole.
_SUMMARY_START = ("== training finished ==", GENERATED_MARK, EXPORTED_MARK)
FAILURE_TAIL = 40  # lines of the log shown when the job fails
# How submit names the job's log file, first thing: "full log: PATH" (tools follow that file).
FULL_LOG = "full log: "


def clean(line: str) -> str:
    """A line as a person reads it: no colour codes, no Ray process prefix."""
    return _ANSI.sub("", _RAY_PREFIX.sub("", line, count=1)).rstrip()


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
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        self._log.close()

    def failure_tail(self) -> list[str]:
        """The log's last lines, without the progress lines: where a failing host said why."""
        lines = [clean(x) for x in self.log_path.read_text().splitlines()]
        return [x for x in lines if x and not x.startswith("[progress]")][-FAILURE_TAIL:]

    def _line(self, raw: str) -> None:
        self._log.write(raw + "\n")
        self._log.flush()
        if self.verbose:
            self._show(raw)
            return
        line = clean(raw)
        if not line:
            return
        if m := PROGRESS_LINE.search(line):
            self._progress(m, line)
        elif line.startswith(_SUMMARY_START):
            self._in_summary = True
            self._show("")
            self._show(line)
        elif line.startswith(RESULT_MARK):
            self._in_summary = False  # machine-readable: in the log file only
        elif self._in_summary or line.startswith(_SHOWN):
            self._failure_lines = 3 if "[FailurePolicy]" in line else self._failure_lines
            self._show(line)
        elif self._failure_lines:
            self._failure_lines -= 1
            self._show(line)

    def _progress(self, m: re.Match, line: str) -> None:
        step, total = int(m["step"]), int(m["total"])
        if self._bar is not None:
            extra = f" MFU {m['mfu']}" if m["mfu"] else ""
            self._bar.update(
                self._task,
                completed=step,
                total=total,
                description=f"loss {m['loss']}  {m['seconds']}s/step  "
                f"{m['tokens']} tokens/s/device{extra}  ETA {m['eta'] or '?'}s",
            )
            return
        every = max(1, total // 10)
        if step == total or step - self._last_shown_step >= every:
            self._last_shown_step = step
            self._show(line)

    def _show(self, line: str) -> None:
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.stream, flush=True)
