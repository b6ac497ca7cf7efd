"""A job survives database faults: transient errors are retried, the job's memory follows what was committed,
no try runs twice; and the decisions it makes compare times of its own clock."""

from __future__ import annotations

import dataclasses
import shlex
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest
from sqlalchemy import event, select
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from ledger import DAG, BashTask
from ledger.infra.clock import FixedClock
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.models import DagRun, TaskInstance, TaskTry
from ledger.scheduler.executors.base import Executor, TaskEvent, WorkItem
from ledger.scheduler.loop.faults import Backoff, is_transient
from ledger.scheduler.loop.job import DagRunJob
from ledger.scheduler.loop.scheduling import create_due_runs
from ledger.services.operations import cancel_run
from ledger.services.sync import register_dag
from ledger.store.db import make_engine, make_sessions
from tests import launcher
from tests.conftest import LEDGER, Cli, migrated_sessions
from tests.pgserver import PostgresServer, postgres_available
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_task_runner import wait_for_file

# -- which errors are transient ---------------------------------------------------------------------------


def wrapped(kind: type[Any], orig: BaseException) -> Any:
    return kind("SELECT 1", {}, orig)


def test_a_locked_or_busy_sqlite_file_is_transient() -> None:
    assert is_transient(wrapped(OperationalError, sqlite3.OperationalError("database is locked")))
    assert is_transient(wrapped(OperationalError, sqlite3.OperationalError("database table is locked")))


def test_a_full_disk_is_waited_out_as_on_postgresql() -> None:
    """SQLite's SQLITE_FULL, like PostgreSQL's disk_full (53100): space freed, the same transaction succeeds
    (decision 0255)."""
    import psycopg.errors as pg

    assert is_transient(wrapped(OperationalError, sqlite3.OperationalError("database or disk is full")))
    assert is_transient(wrapped(OperationalError, pg.DiskFull("could not extend file: No space left on device")))


def test_postgresql_restarts_deadlocks_and_serialization_failures_are_transient() -> None:
    import psycopg.errors as pg

    assert is_transient(wrapped(OperationalError, pg.AdminShutdown("terminating connection")))
    assert is_transient(wrapped(OperationalError, pg.SerializationFailure("could not serialize access")))
    assert is_transient(wrapped(OperationalError, pg.DeadlockDetected("deadlock detected")))
    assert is_transient(wrapped(OperationalError, pg.OperationalError(
        "consuming input failed: server closed the connection unexpectedly")))
    assert is_transient(wrapped(OperationalError, pg.OperationalError(
        'connection failed: connection to server at "127.0.0.1", port 5 failed: Connection refused')))


def test_bugs_and_broken_schemas_are_not_retried() -> None:
    import psycopg.errors as pg

    assert not is_transient(wrapped(IntegrityError, sqlite3.IntegrityError("UNIQUE constraint failed: dag.dag_id")))
    assert not is_transient(wrapped(OperationalError, sqlite3.OperationalError("no such table: dag_run")))
    assert not is_transient(wrapped(ProgrammingError, pg.UndefinedTable('relation "dag_run" does not exist')))
    assert not is_transient(ValueError("database is locked"))  # not from the database at all


def test_backoff_grows_to_its_cap_and_gives_up_after_the_longest_outage() -> None:
    backoff = Backoff(initial=0.1, maximum=5.0, max_outage=60.0)
    delays = [backoff.delay(n) for n in range(1, 12)]
    assert 0.05 <= delays[0] <= 0.1
    assert all(2.5 <= d <= 5.0 for d in delays[7:])
    assert max(delays) <= 5.0
    assert not backoff.gives_up(59.9) and backoff.gives_up(60.0)


# -- in process: a fixed clock and a fake executor -----------------------------------------------------------


T0 = pendulum.datetime(2024, 3, 9, tz="UTC")


@pytest.fixture
def job_parts(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """An engine and sessions on a real SQLite file whose busy timeout is short (100 ms), so that a held write
    lock shows as 'database is locked' instead of a 60 s wait."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    migrated, _ = migrated_sessions(url)
    migrated.dispose()
    engine = make_engine(url)

    @event.listens_for(engine, "connect")
    def _short_wait(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA busy_timeout=100")

    yield engine, make_sessions(engine)
    engine.dispose()


def a_job(tmp_path: Path, engine: Any, sessions: Any, clock: FixedClock, executor: Executor,
          **settings: Any) -> DagRunJob:
    """A started job holding run d 2024-03-09 (a >> b); `settings`: SchedulerSettings other than the defaults."""
    with DAG("d", schedule="@daily", start_date=T0, catchup=True) as dag:
        a = BashTask("a", "true", retries=2, retry_delay=timedelta(seconds=60))
        a >> BashTask("b", "true")
    dag.fileloc = str(tmp_path / "d.py")
    with sessions.begin() as session:
        register_dag(session, dag, now=clock.now(), actor="test")
        assert len(create_due_runs(session, now=clock.now(), actor="test")) == 1  # 2024-03-09
    (tmp_path / "logs").mkdir(exist_ok=True)
    job = DagRunJob(sessions=sessions, engine=engine, settings=SchedulerSettings(**settings), executor=executor,
                    clock=clock, actor="test", logs_folder=tmp_path / "logs", say=lambda _line: None)
    job.start()
    return job


def states(sessions: Any) -> dict[str, tuple[str, int]]:
    with sessions() as s:
        return {ti.task_id: (ti.state, ti.try_number) for ti in s.scalars(select(TaskInstance))}


def test_a_retry_comes_due_by_the_jobs_clock(tmp_path: Path, job_parts: tuple[Any, Any]) -> None:
    """The clock stands at 2024-03-10 while the executor stamps 2026 wall times: the retry is due 60 s after the
    job recorded the failure, by the job's clock, not 60 s after the wall time."""
    engine, sessions = job_parts
    clock = FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))
    executor = FakeExecutor(fail={("a", 1)})
    job = a_job(tmp_path, engine, sessions, clock, executor)
    job.loop_once()  # queues a
    job.loop_once()  # a failed: up for retry
    assert states(sessions)["a"] == ("up_for_retry", 1)
    with sessions() as s:
        due = s.scalar(select(TaskInstance.next_try_at).where(TaskInstance.task_id == "a"))
    assert pendulum.instance(due, tz="UTC") == clock.now().add(seconds=60)
    clock.advance(seconds=59)
    job.loop_once()
    assert states(sessions)["a"] == ("up_for_retry", 1)
    clock.advance(seconds=2)
    for _ in range(4):
        job.loop_once()
    assert states(sessions) == {"a": ("success", 2), "b": ("success", 1)}
    job.shutdown()


def test_a_locked_database_rolls_the_loop_back_and_the_next_loop_records_each_outcome_once(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:
    engine, sessions = job_parts
    executor = FakeExecutor()
    job = a_job(tmp_path, engine, sessions, FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC")), executor)
    job.loop_once()  # queues a (b waits for it)
    assert [i.task_id for i in executor.submitted] == ["a"]
    inflight = dict(job._inflight)
    blocker = sqlite3.connect(str(tmp_path / "ledger.db"), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    with pytest.raises(OperationalError) as raised:
        job.loop_once()
    assert is_transient(raised.value)
    assert job._inflight == inflight  # the loop's changes to memory were put back with its transaction
    assert [e.kind for e in job._unrecorded] == ["started", "finished"]  # a's outcome is kept, not lost
    blocker.execute("ROLLBACK")
    blocker.close()
    for _ in range(4):
        job.loop_once()
    assert states(sessions) == {"a": ("success", 1), "b": ("success", 1)}
    assert [i.task_id for i in executor.submitted] == ["a", "b"]  # nothing was submitted twice
    with sessions() as s:
        assert s.scalar(select(DagRun.state)) == "success"
        assert len(s.scalars(select(TaskTry)).all()) == 2
    job.shutdown()


class HoldingExecutor(FakeExecutor):
    """Each submitted try starts and runs until kill() ends it (reported failed with the kill's reason)."""

    def submit(self, item: WorkItem) -> None:
        self.submitted.append(item)
        self._busy.add(item.ti_id)
        self._events.append(TaskEvent(item.ti_id, item.try_number, "started", time.time(), pid=1))

    def kill(self, ti_id: int, reason: str) -> bool:
        if ti_id not in self._busy:
            return False
        item = next(i for i in self.submitted if i.ti_id == ti_id)
        self._events.append(TaskEvent(ti_id, item.try_number, "finished", time.time(), "failed", pid=1, reason=reason))
        return True


class FailingOnce(DagRunJob):
    """A job whose loop transaction fails once, when `fail` is set, after the stop requests are carried out (run
    creation comes next in the loop's transaction)."""
    fail = False

    def create_runs(self, session: Any, now: Any) -> int:
        if self.fail:
            self.fail = False
            raise OperationalError("INSERT", {}, sqlite3.OperationalError("disk I/O error"))
        return 0


def test_a_try_killed_in_a_transaction_that_fails_is_recorded_stopped_with_its_reason(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:
    """The kill happened (the executor ended the try) though the transaction that asked for it rolled back: the
    job still knows why it killed the try, and the next loop records its end `stopped`, not as a failure that
    gets a retry."""
    engine, sessions = job_parts
    clock = FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))
    executor = HoldingExecutor()
    plain = a_job(tmp_path, engine, sessions, clock, executor)
    job = FailingOnce(**{f.name: getattr(plain, f.name) for f in dataclasses.fields(DagRunJob) if f.init})
    job.__post_init__()
    job.loop_once()  # queues a
    job.loop_once()  # a started
    assert states(sessions)["a"] == ("running", 1)
    with sessions.begin() as s:  # an operator cancels the run (another connection: the job reads it again)
        cancel_run(s, s.scalars(select(DagRun)).one(), now=clock.now(), actor="test")
    job.fail = True
    with pytest.raises(OperationalError):
        job.loop_once()  # the kill is asked for, then the transaction fails
    assert len([e for e in executor._events if e.kind == "finished"]) == 1  # the executor ended the try
    for _ in range(3):
        job.loop_once()
    assert states(sessions)["a"] == ("stopped", 1)
    with sessions() as s:
        assert s.scalars(select(TaskTry.state)).all() == ["stopped"]
    job.shutdown()


# -- the real CLI ----------------------------------------------------------------------------------------------

CATCHUP_DAG = """
    import pendulum
    from ledger import DAG, BashTask

    with DAG("cu", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
             end_date=pendulum.datetime(2024, 1, {days}, tz="UTC"), catchup=True, max_active_runs=4) as dag:
        first = BashTask("first", "sleep 0.2")
        second = BashTask("second", "sleep 0.2")
        first >> second
"""


def assert_every_task_ran_once(cli: Cli, days: int) -> None:
    live = cli.json("timeline", "cu")
    assert len(live) == days and {r["state"] for r in live} == {"success"}, live
    for run in live:
        for ti in cli.json("runs", "show", str(run["run_id"]))["task_instances"]:
            assert len(ti["tries"]) == 1, (run, ti)


@pytest.mark.postgres
@pytest.mark.slow
def test_the_scheduler_survives_a_postgresql_restart_during_a_catch_up(cli: Cli) -> None:
    reason = postgres_available()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    try:
        cli.env["LEDGER_DATABASE_URL"] = server.create_database("faults")
        cli.ok("db", "upgrade")
        days = 16
        cli.write_dag("cu.py", CATCHUP_DAG.format(days=days))
        proc = launcher.popen([LEDGER, "scheduler", "--exit-when-idle"], env=cli.env, cwd=cli.home,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # until some task instances have succeeded
                with server.connect("faults") as conn:
                    done = conn.execute("SELECT count(*) FROM task_instance WHERE state = 'success'").fetchone()[0]
                if done >= 4:
                    break
                time.sleep(0.2)
            assert done >= 4
            server.restart(down_for=2.0)
            out, _ = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
        assert proc.returncode == 0, out
        assert "database error, retrying" in out and "database reachable again" in out, out
        assert_every_task_ran_once(cli, days)
    finally:
        server.stop()


# `first`'s tries say they started (a file), then wait for the file the test writes once it holds the lock
GATED_DAG = CATCHUP_DAG.replace(
    'BashTask("first", "sleep 0.2")',
    'BashTask("first", "echo started > {started}; while [ ! -e {go} ]; do sleep 0.05; done")')


@pytest.mark.slow
def test_the_scheduler_waits_for_a_sqlite_file_another_process_locks_for_10_seconds(ready_cli: Cli) -> None:
    """The lock is taken while tries the scheduler must record are running (a try says so with a file), and those
    tries end while it is held: the scheduler waits for the file, then finishes the catch-up, each try run once."""
    cli = ready_cli
    days = 6
    started, go = cli.home / "first-started", cli.home / "go"
    cli.write_dag("cu.py", GATED_DAG.format(days=days, started=shlex.quote(str(started)), go=shlex.quote(str(go))))
    cli.ok("dags", "list")
    conn = sqlite3.connect(str(cli.home / "ledger.db"), isolation_level=None, timeout=60)  # (the scheduler writes)
    proc = launcher.popen([LEDGER, "scheduler", "--exit-when-idle"], env=cli.env, cwd=cli.home,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_file(started, within=120)  # a try of `first` runs: the scheduler has its end to record
        conn.execute("BEGIN EXCLUSIVE")
        go.touch()  # the running tries end while the file is locked: their ends wait to be written
        time.sleep(10)  # the fault itself: a lock held for 10 s (nothing is waited for here)
        still_running = proc.poll() is None
        conn.execute("ROLLBACK")
        out, _ = proc.communicate(timeout=240)
    finally:
        conn.close()
        go.touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert still_running, out  # it waited for the lock, neither finishing without writing nor giving up
    assert proc.returncode == 0, out
    assert_every_task_ran_once(cli, days)


def test_retry_exponential_backoff_doubles_the_delay_up_to_max_retry_delay(tmp_path: Path,
                                                                        job_parts: tuple[Any, Any]) -> None:
    engine, sessions = job_parts
    clock = FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))
    with DAG("x", schedule="@daily", start_date=T0, catchup=True) as dag:
        BashTask("a", "false", retries=3, retry_delay=timedelta(seconds=60), retry_exponential_backoff=True,
                 max_retry_delay=timedelta(seconds=150))
    dag.fileloc = str(tmp_path / "x.py")
    with sessions.begin() as session:
        register_dag(session, dag, now=clock.now(), actor="test")
        create_due_runs(session, now=clock.now(), actor="test")
    executor = FakeExecutor(fail={("a", 1), ("a", 2), ("a", 3)})
    job = DagRunJob(sessions=sessions, engine=engine, settings=SchedulerSettings(), executor=executor, clock=clock,
                    actor="test", logs_folder=tmp_path / "logs", say=lambda _line: None)
    job.start()
    waits = []
    for _ in range(3):
        for _ in range(3):
            job.loop_once()
        with sessions() as s:
            due = pendulum.instance(s.scalar(select(TaskInstance.next_try_at)), tz="UTC")
        waits.append((due - clock.now()).total_seconds())
        clock.current = due
    job.shutdown()
    assert waits == [60, 120, 150]  # 60 * 2^0, 60 * 2^1, then capped (60 * 2^2 = 240 > 150)


def test_a_change_is_printed_only_once_its_transaction_has_committed(tmp_path: Path,
                                                                      job_parts: tuple[Any, Any]) -> None:
    """The disk fills up as the loop commits: the loop said nothing of what it rolled back; the next loop, which
    commits, says it."""
    engine, sessions = job_parts
    said: list[str] = []
    job = a_job(tmp_path, engine, sessions, FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC")), FakeExecutor())
    job.say = said.append

    def full(_conn: Any) -> None:
        raise OperationalError("COMMIT", {}, sqlite3.OperationalError("database or disk is full"))

    event.listen(engine, "commit", full)
    with pytest.raises(OperationalError):
        job.loop_once()  # would start the run: running, and queue a
    assert said == []
    with sessions() as s:
        assert s.scalar(select(DagRun.state)) == "queued"
    event.remove(engine, "commit", full)
    job.loop_once()
    assert any("queued → running" in line for line in said), said
    job.shutdown()


def test_a_task_instance_changed_behind_the_jobs_memory_is_refused_then_read_again(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:
    """Another process marks b skipped without the event that tells jobs to read again: the job's guarded queue of
    b from what it remembered (scheduled) writes nothing and raises StaleState; the next loop reads b skipped and
    never runs it, and the run ends as the mark says."""
    from ledger.core.states import StaleState

    engine, sessions = job_parts
    executor = FakeExecutor()
    job = a_job(tmp_path, engine, sessions, FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC")), executor)
    job.loop_once()  # queues a; b waits for it
    other = sqlite3.connect(str(tmp_path / "ledger.db"), isolation_level=None)
    other.execute("UPDATE task_instance SET state = 'skipped' WHERE task_id = 'b'")
    other.close()
    with pytest.raises(StaleState):
        for _ in range(3):
            job.loop_once()  # a succeeds; b, believed scheduled, is queued from memory
    for _ in range(4):
        job.loop_once()
    assert states(sessions) == {"a": ("success", 1), "b": ("skipped", 0)}
    assert [i.task_id for i in executor.submitted] == ["a"]
    with sessions() as s:
        assert s.scalar(select(DagRun.state)) == "success"
    job.shutdown()
