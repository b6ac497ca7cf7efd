"""A scheduler that is alive but silent (stopped with SIGSTOP, as a frozen container or a debugger does; its
database unreachable from its host alone) loses its runs to another scheduler after LEDGER_LOCK_TIMEOUT. Its local
try must not run on beside the new try the other scheduler gives its task: the silent scheduler's worker kills it
once two thirds of the lock timeout have passed without a heartbeat (decision 0349). The real CLI, on SQLite; the
test stops and continues the scheduler's process as an operator would, and waits for processes to end, never for
time."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests import launcher
from tests.conftest import LEDGER, Cli
from tests.scheduler.test_local_try_reports import trace_of, wait_for
from tests.scheduler.test_scheduler_cli import FAST, HEADER, query, schedule
from tests.scheduler.test_task_runner import process_gone

pytestmark = pytest.mark.timeout(240)

LOCK = {"LEDGER_LOCK_TIMEOUT": "3"}  # (with FAST's heartbeats: at least three times heartbeat + poll interval)

# each try writes "start N PID" and, should another try of the task still run as it starts, "overlap N"; it ends
# once the file `go` exists
WAITS = HEADER + """
import os
import time
TRACE, GO = @TRACE@, @GO@

def waits(context):
    with open(TRACE) as trace:
        others = [line.split() for line in trace if line.startswith("start ")]
    with open(TRACE, "a") as trace:
        for _start, number, pid in others:
            try:
                os.kill(int(pid), 0)
                trace.write(f"overlap {number}\\n")
            except ProcessLookupError:
                pass
        trace.write(f"start {context.try_number} {os.getpid()}\\n")
    while not os.path.exists(GO):
        time.sleep(0.05)
    with open(TRACE, "a") as trace:
        trace.write(f"end {context.try_number}\\n")

with DAG("silent", schedule=None, start_date=START, default_args={"retries": 0}):
    PythonTask("waits", waits)
"""


def stale_for(cli: Cli) -> float:
    """Seconds since the heartbeat of the job that holds the run (by the database's clock, as a taker reads it)."""
    ((age,),) = query(cli, "SELECT (julianday('now') - julianday(job.latest_heartbeat)) * 86400 FROM dag_run "
                           "JOIN job ON job.id = dag_run.lock_holder")
    return float(age)


def test_a_scheduler_stopped_with_sigstop_has_its_try_killed_before_another_scheduler_runs_the_task_again(
        ready_cli: Cli) -> None:
    cli = ready_cli
    trace, go = cli.home / "trace", cli.home / "go"
    trace.touch()
    cli.write_dag("silent.py", WAITS.replace("@TRACE@", repr(str(trace))).replace("@GO@", repr(str(go))))
    cli.ok("trigger", "silent", "--logical-date", "2024-03-01")
    first = launcher.popen([LEDGER, "scheduler"], env={**cli.env, **FAST, **LOCK}, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, cwd=cli.home)
    try:
        wait_for("try 1 to start", lambda: [w[0] for w in trace_of(trace)] == ["start"])
        try_pid = int(trace_of(trace)[0][2])
        os.kill(first.pid, signal.SIGSTOP)  # the scheduler the operator sees; its worker and try run on
        # its worker kills the try by itself, the scheduler being stopped (without the fence it would run until `go`)
        assert process_gone(try_pid, within=60), "the silent scheduler's try ran on"
        go.write_text("")
        # its run may be taken once its heartbeat is older than the lock timeout (a scheduler that finds every run
        # held by a live job has nothing to do, and --exit-when-idle ends it)
        wait_for("the stopped scheduler's lock to go stale", lambda: stale_for(cli) > 3.0)
        output = schedule(cli, **LOCK)
        assert "Traceback" not in output
        os.kill(first.pid, signal.SIGCONT)  # it finds its run taken: it records nothing of it
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) in (0, 143), first.stderr.read().decode() if first.stderr else ""
    finally:
        with_signal = [signal.SIGCONT, signal.SIGKILL]
        for signum in with_signal if first.poll() is None else []:
            os.kill(first.pid, signum)
        first.wait(30)
    assert trace_of(trace) == [["start", "1", str(try_pid)], ["start", "2", trace_of(trace)[1][2]], ["end", "2"]]
    assert query(cli, "SELECT try_number, state FROM task_try ORDER BY try_number") == [(1, "lost"), (2, "success")]
    assert query(cli, "SELECT state, try_number FROM task_instance") == [("success", 2)]
    assert query(cli, "SELECT state FROM dag_run") == [("success",)]
    (lost,) = cli.json("events", "--dag", "silent", "--kind", "try_lost")
    assert lost["details"]["try_number"] == 1
    (log,) = (cli.home / "logs").rglob("try_1.log")
    assert "Traceback" not in log.read_text()

