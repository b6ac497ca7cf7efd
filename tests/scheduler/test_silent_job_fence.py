"""A job that falls silent does not keep its local tries running (decision 0349): past the deadline its last committed
heartbeat gave them (two thirds of LEDGER_LOCK_TIMEOUT), after which another scheduler may take its runs and run
them again, its LocalExecutor's workers start nothing and kill the try they run. Real workers and tries; the test
moves the deadline itself (Executor.hold_until), so nothing waits on the clock but the workers' look at it."""

from __future__ import annotations

import multiprocessing.connection
import os
import time
from pathlib import Path

import pytest

from ledger.scheduler.executors.local import SILENT_JOB_KILLED, SILENT_JOB_NEVER_STARTED, LocalExecutor
from ledger.scheduler.executors.local_hold import Hold, fence_after, now
from ledger.scheduler.loop.cadence import Heartbeat
from tests.scheduler.conftest import MakeExecutor
from tests.scheduler.slow_stream import SLOW_STREAM
from tests.scheduler.test_executors import outcome, run_all, wait_for_event
from tests.scheduler.test_task_runner import process_gone, wait_for_file, work_item

HOUR = 3600.0


@pytest.mark.parametrize(("kind", "task"), [("local", "bash_sleep"), ("local_reuse", "sleepy")])
def test_a_try_running_when_its_jobs_deadline_passes_is_killed_by_its_worker_and_lost(
        make: MakeExecutor, dag_file: Path, kind: str, task: str) -> None:
    executor = make(kind, 1)
    executor.hold_until(now() + HOUR)
    executor.submit(work_item(dag_file, task, ti_id=1))
    started = wait_for_event(executor, "started")
    sleep_pid = int(wait_for_file(dag_file.parent / "sleep.pid")) if task == "bash_sleep" else None
    executor.hold_until(now() - 1.0)  # the job wrote no heartbeat since: silent past its deadline
    finished = wait_for_event(executor, "finished")
    assert (finished.ti_id, finished.state, finished.reason) == (1, "lost", SILENT_JOB_KILLED)
    assert process_gone(started.pid or 0)
    if sleep_pid is not None:  # (what the try started in its process group went with it)
        assert process_gone(sleep_pid)


def test_a_worker_past_its_jobs_deadline_starts_nothing_until_a_heartbeat_moves_it_on(
        make: MakeExecutor, dag_file: Path) -> None:
    executor = make("local", 1)
    executor.hold_until(now() - 1.0)
    events = run_all(executor, [work_item(dag_file, "noop", ti_id=1)])[1]
    assert [(e.kind, e.state, e.reason) for e in events] == [("finished", "failed", SILENT_JOB_NEVER_STARTED)]
    executor.hold_until(now() + HOUR)
    assert outcome(run_all(executor, [work_item(dag_file, "noop", ti_id=2)])[2]) == ("success", None)


# a try whose code returns, and whose process then blocks on its way out (a stream its code left in sys.stderr, which
# waits for a FIFO nobody writes to): its code has ended, its report is left, its process has not exited
ENDS_THEN_BLOCKS = """
import sys

import pendulum
from ledger import DAG, PythonTask

RELEASE = @RELEASE@


""" + SLOW_STREAM + """

def ends(context):
    sys.stderr = SlowStream(sys.stderr)
    return 7


with DAG("traced", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("t0", ends)
"""


def test_a_try_whose_code_ended_before_the_deadline_passed_is_recorded_as_it_ended(
        make: MakeExecutor, tmp_path: Path) -> None:
    release = tmp_path / "release"
    os.mkfifo(release)
    dag_file = tmp_path / "traced.py"
    dag_file.write_text(ENDS_THEN_BLOCKS.replace("@RELEASE@", repr(str(release))))
    executor = make("local", 1)
    executor.hold_until(now() + HOUR)
    item = work_item(dag_file, "t0", ti_id=1, dag_id="traced")
    executor.submit(item)
    wait_for_event(executor, "started")
    wait_for_file(Path(item.log_path + ".report.json"))  # its code has ended
    executor.hold_until(now() - 1.0)
    finished = wait_for_event(executor, "finished")
    assert (finished.state, finished.reason) == ("success", None)
    assert finished.report is not None and finished.report.pushed == (("return_value", 7),)


def test_each_committed_heartbeat_holds_the_tries_for_two_thirds_of_the_lock_timeout_from_when_its_time_was_read(
) -> None:
    held: list[float] = []
    beat = Heartbeat(2.0, lock_timeout=30.0)
    before = now()
    beat.read_time(lambda: None)  # type: ignore[arg-type,return-value]
    beat.committed(held.append)  # (no heartbeat written: nothing moves)
    assert held == []
    beat.read_time(lambda: None)  # type: ignore[arg-type,return-value]
    beat.done()  # written in that transaction
    beat.committed(held.append)
    (until,) = held
    assert before + fence_after(30.0) <= until <= now() + fence_after(30.0)
    assert fence_after(30.0) == 20.0
    beat.read_time(lambda: None)  # type: ignore[arg-type,return-value]
    beat.done()  # written in a transaction that then rolled back: the next commit without one moves nothing
    assert not beat.due()
    beat.read_time(lambda: None)  # type: ignore[arg-type,return-value]
    assert beat.due()  # (and the next transaction writes it again)
    beat.committed(held.append)
    assert held == [until]


def test_a_deadline_nobody_set_holds_forever_and_a_worker_reads_what_the_executor_writes() -> None:
    hold = Hold.make()
    assert not hold.passed() and hold.deadline() == float("inf")
    worker_side = Hold.attach(os.dup(hold.fd))
    hold.until(now() - 1.0)
    assert worker_side.passed()
    hold.until(now() + HOUR)
    assert not worker_side.passed()


def test_the_executor_starts_each_worker_with_the_jobs_deadline(make: MakeExecutor, dag_file: Path) -> None:
    """A worker started on demand after the deadline moved reads it as the others do (one deadline, shared)."""
    executor = make("local", 2)
    assert isinstance(executor, LocalExecutor)
    executor.hold_until(now() + HOUR)
    executor.submit(work_item(dag_file, "bash_sleep", ti_id=1))
    wait_for_event(executor, "started")
    executor.hold_until(now() - 1.0)
    executor.submit(work_item(dag_file, "noop", ti_id=2))  # (the second worker, started for it)
    ends: dict[int, tuple[str | None, str | None]] = {}
    deadline = time.monotonic() + 30
    while len(ends) < 2 and time.monotonic() < deadline:
        ends.update((e.ti_id, (e.state, e.reason)) for e in executor.drain() if e.kind == "finished")
        multiprocessing.connection.wait(executor.wait_handles(), timeout=0.2)
    assert len(executor._workers) == 2
    assert ends == {1: ("lost", SILENT_JOB_KILLED), 2: ("failed", SILENT_JOB_NEVER_STARTED)}
