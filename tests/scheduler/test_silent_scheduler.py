"""A scheduler that is alive but silent (stopped with SIGSTOP, as a frozen container or a debugger does; its
database unreachable from its host alone) loses its runs to another scheduler after LEDGER_LOCK_TIMEOUT. Its local
try must not run on beside the new try the other scheduler gives its task: the silent scheduler's worker kills it
once two thirds of the lock timeout have passed without a heartbeat (decision 0349). The real CLI, on SQLite; the
test stops and continues the scheduler's process as an operator would, and waits for processes to end, never for
time."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

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


def stop_outside_a_transaction(pid: int, database: Path) -> None:
    """SIGSTOP the process (the scheduler the operator sees), at a moment it holds no write transaction on the SQLite
    file: stopped inside one, it would hold the database's write lock, and nobody could write at all (on SQLite a
    frozen writer freezes the database; no scheduler can take its runs then). Stopped inside one, it is continued and
    stopped again."""
    for _ in range(1000):
        os.kill(pid, signal.SIGSTOP)
        wait_for("the scheduler to stop", lambda: Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                 == "T")
        probe = sqlite3.connect(database, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:  # (it holds the write lock: let it end that transaction)
            os.kill(pid, signal.SIGCONT)
        finally:
            probe.close()
    raise AssertionError("the scheduler was inside a write transaction at each of 1000 stops")


def stale_for(cli: Cli) -> float:
    """Seconds since the heartbeat of the job that holds the run (by the database's clock, as a taker reads it)."""
    ((age,),) = query(cli, "SELECT (julianday('now') - julianday(job.latest_heartbeat)) * 86400 FROM dag_run "
                           "JOIN job ON job.id = dag_run.lock_holder")
    return float(age)


def a_scheduler_running_try_1(cli: Cli) -> tuple[Any, Path, Path]:
    """`ledger scheduler` (FAST, the 3 s lock timeout) running try 1 of `silent.waits`: (the scheduler, the trace,
    the file that lets the try end)."""
    trace, go = cli.home / "trace", cli.home / "go"
    trace.touch()
    cli.write_dag("silent.py", WAITS.replace("@TRACE@", repr(str(trace))).replace("@GO@", repr(str(go))))
    cli.ok("trigger", "silent", "--logical-date", "2024-03-01")
    first = launcher.popen([LEDGER, "scheduler"], env={**cli.env, **FAST, **LOCK}, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, cwd=cli.home)
    try:
        wait_for("try 1 to start", lambda: [w[0] for w in trace_of(trace)] == ["start"])
    except BaseException:
        first.kill()
        first.wait(30)
        raise
    return first, trace, go


def test_a_scheduler_stopped_with_sigstop_has_its_try_killed_before_another_scheduler_runs_the_task_again(
        ready_cli: Cli) -> None:
    cli = ready_cli
    first, trace, go = a_scheduler_running_try_1(cli)
    try:
        try_pid = int(trace_of(trace)[0][2])
        stop_outside_a_transaction(first.pid, cli.home / "ledger.db")  # its worker and try run on
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



def test_a_scheduler_stopping_gracefully_beats_on_and_its_try_runs_to_its_end_within_the_grace(
        ready_cli: Cli) -> None:
    """SIGTERM: no loop runs while the scheduler waits for its running try (LEDGER_SHUTDOWN_GRACE, 30 s), but it still
    holds its run: it keeps writing its heartbeat, so neither another scheduler nor its own worker's fence (two
    thirds of the 3 s lock timeout) ends the try."""
    cli = ready_cli
    first, trace, go = a_scheduler_running_try_1(cli)
    try:
        ((asked,),) = query(cli, "SELECT julianday('now')")
        first.send_signal(signal.SIGTERM)
        wait_for("a heartbeat written well past where the fence would have been",
                 lambda: query(cli, "SELECT (julianday(latest_heartbeat) - ?) * 86400 FROM job", asked)[0][0] > 3.0)
        go.write_text("")
        assert first.wait(60) in (0, 143), first.stderr.read().decode() if first.stderr else ""
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(30)
    assert trace_of(trace) == [["start", "1", trace_of(trace)[0][2]], ["end", "1"]]
    assert query(cli, "SELECT try_number, state FROM task_try") == [(1, "success")]
