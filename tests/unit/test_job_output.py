"""What `tpu-launcher submit` shows of a job, fed the lines a real job prints (as Ray relays them,
with its process prefixes and colours): the plan, progress every tenth of the run, checkpoint saves,
restarts and Ray Train's reason, the summary; the rest only in the log file, which keeps every
line."""

from __future__ import annotations

import io

import pytest

from launcher.client.jobs.output import JobOutput
from launcher.core.job import events as job_events
from launcher.core.job.events import EventKind, clean, parse

pytestmark = pytest.mark.unit

W = "\x1b[36m(RayTrainWorker pid=6014)\x1b[0m "
C = "\x1b[36m(TrainController pid=5831)\x1b[0m "
JOB = [
    "2026-11-22 14:48:28,653\tINFO worker.py:1691 -- Using address 127.0.0.2:6379",
    "launcher: v5p-16 (TPU v5p 2x2x2: 2 hosts x 4 chips): 2 workers x 4 devices = 8 devices",
    C + "Requesting resources: {'TPU': 4} * 2",
    *(W + f"Config param adam_b{i}: 0.9" for i in range(300)),
    W + "[transformers] PyTorch was not found. Models won't be available",
    C + "Traceback (most recent call last):",
    C + "  Failed to send resource request ... safe to ignore",
    *(
        W + f"[progress] step {s}/40 loss {5 - s / 10:.4f} step time 0.300s tokens/s/device 400 "
        "TFLOP/s/device 0.001 ETA 3s"
        for s in range(1, 41)
    ),
    W + "[checkpoint] saved step 4",
    C + "[FailurePolicy] RETRY",
    C + "  Source: worker group",
    C + "  Error count: 1 (max allowed: 3)",
    C + "Error: ActorDiedError: the actor died unexpectedly",
    C + '  File "ray/train/...", line 1, in <module>',
    W + "[restart] the worker group started again (start 2) on 2 hosts",
    "== training finished ==",
    "run:          demo (started from step 0; 40 steps run in 60s)",
    'LAUNCHER_RESULT {"run_dir": "/data/demo"}',
]


def _run(tmp_path, verbose=False) -> tuple[list[str], str]:
    stream = io.StringIO()
    out = JobOutput(tmp_path / "job.log", verbose=verbose, stream=stream)
    text = "\n".join(JOB) + "\n"
    for i in range(0, len(text), 777):  # chunks cut mid-line, as a websocket delivers them
        out.feed(text[i : i + 777])
    out.close()
    return stream.getvalue().splitlines(), (tmp_path / "job.log").read_text()


def test_the_terminal_shows_what_matters_and_the_log_keeps_everything(tmp_path):
    shown, log = _run(tmp_path)
    assert log == "\n".join(JOB) + "\n"
    assert shown[0].startswith("launcher: v5p-16")
    progress = [line for line in shown if line.startswith("[progress]")]
    assert [line.split()[2] for line in progress] == [f"{s}/40" for s in range(4, 41, 4)]
    for wanted in (
        "[checkpoint] saved step 4",
        "[FailurePolicy] RETRY",
        "Error: ActorDiedError: the actor died unexpectedly",
        "[restart] the worker group started again (start 2) on 2 hosts",
        "== training finished ==",
        "run:          demo (started from step 0; 40 steps run in 60s)",
    ):
        assert wanted in shown
    joined = "\n".join(shown)
    for hidden in (
        "Config param",
        "PyTorch",
        "Traceback",
        "safe to ignore",
        "LAUNCHER_RESULT",
        "Using address",
        "Requesting resources",
        'File "ray/train',
    ):
        assert hidden not in joined
    assert len(shown) < 30


def test_verbose_shows_every_line(tmp_path):
    shown, _ = _run(tmp_path, verbose=True)
    assert len(shown) == len(JOB)


def test_every_line_into_a_pipe_has_no_colour_codes_and_the_log_keeps_them(tmp_path):
    line = "\x1b[36m(RayTrainWorker pid=7)\x1b[0m Config param steps: 10"
    stream = io.StringIO()  # not a terminal, as `tpu-launcher logs --raw | less` sees it
    output = JobOutput(tmp_path / "job.log", verbose=True, stream=stream)
    output.feed(line + "\n")
    output.close()
    assert stream.getvalue() == "(RayTrainWorker pid=7) Config param steps: 10\n"
    assert (tmp_path / "job.log").read_text() == line + "\n"


def test_a_failing_jobs_last_lines_come_from_the_log(tmp_path):
    out = JobOutput(tmp_path / "job.log", stream=io.StringIO())
    out.feed(
        "".join(W + f"line {i}\n" for i in range(100)) + W + EVERY_EVENT[EventKind.PROGRESS] + "\n"
    )
    out.close()
    tail = out.failure_tail()
    assert tail[-1] == "line 99" and len(tail) == 40  # without prefixes or progress lines


def test_clean_strips_rays_prefix_and_colours():
    assert clean(W + "\x1b[1mhello\x1b[22m") == "hello"


def test_the_progress_line_reads_back_as_written():
    line = job_events.format_progress(12, 40, 3.5231, 0.4312, 1234.4, 0.0125, 0.4567, 12.2)
    f = parse(clean(W + line)).fields
    assert (f["step"], f["total"], f["loss"], f["seconds"]) == ("12", "40", "3.5231", "0.431")
    assert (f["tokens"], f["tflops"], f["mfu"], f["eta"]) == ("1234", "0.013", "45.7%", "12")
    # On CPU devices: no TFLOP/s, no MFU (not "0.0%").
    bare = parse(job_events.format_progress(1, 2, 1.0, 1.0, 1.0, None, None, 0.0)).fields
    assert "mfu" not in bare and "tflops" not in bare and bare["eta"] == "0"
    assert "eval_loss" not in bare  # until the first eval
    with_eval = job_events.format_progress(12, 40, 3.5, 0.4, 1234.4, None, None, 12.2, 3.1642)
    f = parse(with_eval).fields
    assert (f["loss"], f["eval_loss"], f["seconds"]) == ("3.5000", "3.1642", "0.400")


def test_the_eval_line_reads_back_as_written():
    f = parse(clean(W + job_events.format_eval(10, 3.16423, 23.676))).fields
    assert (f["step"], f["loss"], f["perplexity"]) == ("10", "3.1642", "23.68")


# One line of every kind, as the job (or submit) writes it through job_events.
EVERY_EVENT = {
    EventKind.PROGRESS: job_events.format_progress(2, 2, 3.1, 0.3, 400, 0.1, 0.2, 0),
    EventKind.CHECKPOINT: job_events.format_checkpoint(5),
    EventKind.EVAL: job_events.format_eval(5, 3.646, 38.33),
    EventKind.RESTART: job_events.format_restart(2, 4, 2),
    EventKind.PREEMPTED: job_events.format_preempted(28, 15.0),
    EventKind.HANG: job_events.format_hang("host 1: step 11, 33s ago; frozen"),
    EventKind.ELASTIC: job_events.format_elastic(1, 2, 16, {"ici_fsdp_parallelism": 4}),
    EventKind.LAUNCHER: "launcher: v5p-16 (TPU v5p 2x2x2: 2 hosts x 4 chips)",
    EventKind.FAILURE_POLICY: "[FailurePolicy] RETRY",
    EventKind.SUMMARY: job_events.format_summary_title("training"),
    EventKind.RESULT: job_events.format_result({"last_step": 1}),
    EventKind.FULL_LOG: job_events.format_full_log("/tmp/job.log"),
    EventKind.SCRIPT: job_events.format_script("step 5 loss 4.3"),
    EventKind.DEVICES: job_events.format_devices(
        "straggler: s/1 (its chips idle); duty cycle by host: s/0 90%, s/1 0%"
    ),
}
HIDDEN = {EventKind.RESULT}  # machine-readable: the log file only
WRITTEN_BY_SUBMIT = {EventKind.FULL_LOG}  # printed by submit itself, never fed from the job


def test_every_event_parses_back_to_its_kind():
    assert set(EVERY_EVENT) == set(EventKind), "a new event kind needs a line here"
    for kind, line in EVERY_EVENT.items():
        event = parse(clean(W + line))
        assert event is not None and event.kind is kind, (kind, line)
    assert parse("Config param adam_b1: 0.9") is None


@pytest.mark.parametrize("kind", sorted(set(EventKind) - WRITTEN_BY_SUBMIT))
def test_every_event_the_job_writes_reaches_the_terminal_unless_machine_readable(tmp_path, kind):
    """Through Ray's worker prefix and colours, as a real job's lines arrive."""
    screen = io.StringIO()
    out = JobOutput(tmp_path / "job.log", stream=screen)
    out.feed(W + EVERY_EVENT[kind] + "\n")
    out.close()
    shown = screen.getvalue()
    assert (EVERY_EVENT[kind] in shown) is (kind not in HIDDEN), (kind, shown)


def test_a_restarts_cause_is_one_line_of_the_default_view(tmp_path):
    """Ray Train's failure decision, as its failure policy logs a dead worker (Ray 2.60:
    failure_handling/default.py's lines, poll.py's "[Rank ...] Error Snippet", ActorDiedError's
    fields): the view shows which ranks, what happened, where and the worker's exit, in one
    line; the traceback and the actor's ids stay in the log file."""
    died = [
        C + "[FailurePolicy] RETRY",
        C + "  Source: worker group",
        C + "  Error count: 1 (max allowed: 3)",
        C + "Error: Training failed due to worker errors:",
        C + "[Rank 4,5,6,7 Error Snippet]:",
        C + "The actor died unexpectedly before finishing this task.",
        C + "\tclass_name: RayTrainWorker",
        C + "\tactor_id: 5c2a9f0e1d",
        C + "\tpid: 48213",
        C + "\tip: 10.8.1.7",
        C + "The actor is dead because its worker process has died. Worker exit type: "
        "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error "
        "code 2.",
        C + "Traceback (most recent call last):",
        C + '  File "ray/train/...", line 1, in <module>',
        W + "[restart] the worker group started again (start 2) on 2 hosts",
    ]
    stream = io.StringIO()
    out = JobOutput(tmp_path / "job.log", stream=stream)
    out.feed("\n".join(died) + "\n")
    out.close()
    shown = stream.getvalue().splitlines()
    (cause,) = [line for line in shown if line.startswith("  ranks ")]
    assert cause.startswith(
        "  ranks 4,5,6,7: The actor died unexpectedly before finishing this task. "
        "(ip 10.8.1.7, pid 48213) The actor is dead because its worker process has died."
    ), cause
    assert "Worker unexpectedly exits with a connection error code 2." in cause
    assert "actor_id" not in stream.getvalue() and "Traceback" not in stream.getvalue()
    assert shown[-1].startswith("[restart] the worker group started again (start 2)")
    # A snippet the log ends in is still said.
    cut = io.StringIO()
    out = JobOutput(tmp_path / "cut.log", stream=cut)
    out.feed("\n".join(died[4:6]))
    out.close()
    assert cut.getvalue().strip().startswith("ranks 4,5,6,7: The actor died unexpectedly")
