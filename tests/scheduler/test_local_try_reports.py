"""A local try whose code ended is recorded as it ended, whatever became of its process afterwards (decision 0298):
its report, `<log>.report.json`, written whole the moment its code ended, is what the LocalExecutor (its worker
killed) or the next scheduler (the scheduler killed, and its workers with it) records, once; only a try that left no
report is lost.

The try's code writes its start and end lines, returns 7, and then (as its process writes its log's outcome line)
flushes a stream it left in sys.stderr, which blocks on opening a FIFO no one writes to: its code has ended, its
process has not exited, and it stays so until it is killed. The test waits for the report file to read whole (it
is written in place: it exists a moment before its bytes do), never for time."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ledger.scheduler.runtime.try_report import REPORT, ReportFile
from tests import launcher
from tests.conftest import LEDGER, Cli
from tests.scheduler.slow_stream import SLOW_STREAM
from tests.scheduler.test_scheduler_cli import FAST, query, schedule

pytestmark = pytest.mark.timeout(240)

ENDS_THEN_BLOCKS = """
import os
import sys

import pendulum
from ledger import DAG, PythonTask

TRACE, RELEASE = @TRACE@, @RELEASE@


""" + SLOW_STREAM + """

def ends(context):
    with open(TRACE, "a") as trace:
        trace.write(f"start {context.try_number} {os.getpid()}\\n")
        trace.write(f"end {context.try_number}\\n")
    if context.try_number == 1:
        sys.stderr = SlowStream(sys.stderr)
    return 7


with DAG("blocks", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         default_args={"retries": 0}) as dag:
    PythonTask("t0", ends)
"""


def wait_for(what: str, check: object, within: float = 60.0) -> None:
    """Until `check()` holds (what the test or the try under test makes happen), failing loudly after `within` s."""
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out after {within:.0f} s waiting for {what}"
        time.sleep(0.05)


def trace_of(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


def a_try_whose_code_ended_and_whose_process_blocks(cli: Cli) -> tuple[subprocess.Popen[bytes], Path, int]:
    """A scheduler (the LocalExecutor) running try 1 of `blocks`, whose code has ended and left its report, and whose
    process blocks: (the scheduler, the trace, the try's pid)."""
    trace, release = cli.home / "trace", cli.home / "release"
    trace.touch()
    os.mkfifo(release)
    cli.write_dag("blocks.py", ENDS_THEN_BLOCKS.replace("@TRACE@", repr(str(trace)))
                  .replace("@RELEASE@", repr(str(release))))
    cli.ok("trigger", "blocks", "--logical-date", "2024-03-01")
    scheduler = launcher.popen([LEDGER, "scheduler", "--exit-when-idle"], env={**cli.env, **FAST},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cli.home)
    # the report is written in place (decision 0323): its file is there a moment before its bytes are
    wait_for("the try's code to end and its whole report to be left beside its log",
             lambda: any(ReportFile(str(log)).read() for log in (cli.home / "logs").rglob("try_1.log")))
    (log,) = (cli.home / "logs").rglob("try_1.log")
    assert "outcome:" not in log.read_text()  # its process is still in its end: it has not exited
    assert [words[0] for words in trace_of(trace)] == ["start", "end"]
    return scheduler, trace, int(trace_of(trace)[0][2])


def assert_recorded_success_once(cli: Cli, trace: Path) -> None:
    assert query(cli, "SELECT try_number, state FROM task_try") == [(1, "success")]
    assert query(cli, "SELECT state, try_number FROM task_instance") == [("success", 1)]
    assert query(cli, "SELECT state FROM dag_run") == [("success",)]
    assert query(cli, "SELECT key, value FROM xcom WHERE try_number = 1") == [("return_value", 7)]
    assert trace_of(trace) == [["start", "1", trace_of(trace)[0][2]], ["end", "1"]]  # its code ran once
    assert list((cli.home / "logs").rglob("*" + REPORT)) == []  # taken
    (log,) = (cli.home / "logs").rglob("try_1.log")
    assert log.read_text().splitlines()[-1].endswith(
        "outcome: success, as the report it left when its code ended says (its worker or job died before it exited)")


def test_a_try_whose_scheduler_is_killed_after_its_code_ended_is_recorded_by_its_report_by_the_next_scheduler(
        ready_cli: Cli) -> None:
    cli = ready_cli
    scheduler, trace, _pid = a_try_whose_code_ended_and_whose_process_blocks(cli)
    os.kill(scheduler.pid, signal.SIGKILL)  # the process the operator sees; its workers and the try die with it
    scheduler.wait(30)
    output = schedule(cli)
    assert_recorded_success_once(cli, trace)
    assert cli.json("events", "--dag", "blocks", "--kind", "try_lost") == []
    assert "Traceback" not in output


def test_a_try_whose_worker_is_killed_after_its_code_ended_is_recorded_by_its_report(ready_cli: Cli) -> None:
    cli = ready_cli
    scheduler, trace, pid = a_try_whose_code_ended_and_whose_process_blocks(cli)
    worker = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])  # the try's parent
    assert worker != scheduler.pid
    os.kill(worker, signal.SIGKILL)  # the try dies with it
    assert scheduler.wait(120) == 0
    assert_recorded_success_once(cli, trace)
