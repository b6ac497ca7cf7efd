"""A job keeps a picture of each run it holds (the run, its version's spec, its task instances) and keeps it up to
date with what it writes itself: a run whose try ended is decided again from that picture, without reading its
task instances back. What another process changed (it records an event) is read from the database first."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest
from sqlalchemy import func, select

from ledger import DAG, BashTask
from ledger.core.states import RunState, TaskState
from ledger.infra.clock import FixedClock
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.models import DagRun, TaskInstance, TaskTry
from ledger.scheduler.executors.base import TaskEvent
from ledger.scheduler.loop.job import DagRunJob
from ledger.scheduler.loop.scheduling import create_due_runs
from ledger.services.operations import cancel_run, clear_tasks, mark_run, mark_tasks, set_pool, trigger
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import a_job, job_parts, states  # noqa: F401  (a fixture)
from tests.scheduler.test_held_starts import SteppedExecutor
from tests.statements import statements_on

CLOCK = FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))
T0 = pendulum.datetime(2024, 3, 9, tz="UTC")
READS_OF_RUNS = ("FROM task_instance WHERE task_instance.run_id IN", "FROM dag_run WHERE dag_run.id IN")
READS_KEPT_IN_MEMORY = ("SELECT dag_run.id FROM dag_run WHERE dag_run.lock_holder",  # the held runs
                        "FROM pool",  # the pools' slots
                        "task_instance.signal_request IS NOT NULL",  # signal requests on the job's tries
                        "task_instance.max_tries, task_instance.state FROM task_instance WHERE task_instance.id IN")
AUDIT_COVER_READ = ("SELECT task_instance.run_id, task_instance.task_id, task_instance.map_index, "
                    "task_instance.try_number, task_instance.state, task_try.try_number AS try_number_1, "
                    "task_try.state AS state_1, task_try.dag_version FROM task_instance LEFT OUTER JOIN task_try ON "
                    "task_try.task_instance_id = task_instance.id WHERE task_instance.run_id IN")
AUDIT_WRITES_READ = "FROM lineage_write WHERE lineage_write.run_id IN"  # (decision 0353)


class KillableExecutor(SteppedExecutor):
    """A try runs until the test ends it or the job kills it."""

    def kill(self, ti_id: int, reason: str) -> bool:
        item = next(i for i in self.submitted if i.ti_id == ti_id)
        self._events.append(TaskEvent(ti_id, item.try_number, "finished", time.time(), "failed", pid=7, reason=reason))
        return True


@pytest.fixture(autouse=True)
def _no_verify_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count what a loop reads: the verify mode's reads (scheduler/loop/memory.py) are not the loop's, and
    the tests here compare the job's memory with the database themselves."""
    monkeypatch.setenv("LEDGER_VERIFY_MEMORY", "0")


@pytest.fixture
def statements(job_parts: tuple[Any, Any]) -> Iterator[list[str]]:  # noqa: F811
    with statements_on(job_parts[0]) as seen:
        yield seen


@dataclass
class CreatingJob(DagRunJob):
    """Creates the due runs, as SchedulerJob does, once `creating` is set."""

    creating: bool = False

    def create_runs(self, session: Any, now: Any) -> int:
        return len(create_due_runs(session, now=now, actor=self.actor)) if self.creating else 0


def a_steady_job(tmp_path: Path, parts: tuple[Any, Any], executor: Any) -> Any:
    """tests/scheduler/test_database_faults.py's job (runs d: a >> b), with no full pass during the test."""
    return a_job(tmp_path, *parts, CLOCK, executor, poll_interval=600.0)


def a_started_job(kind: type[DagRunJob], tmp_path: Path, parts: tuple[Any, Any], executor: Any,
                  clock: FixedClock) -> Any:
    """A job of `kind` on the test's database, with no full pass during the test and starts written at once."""
    (tmp_path / "logs").mkdir()
    job = kind(sessions=parts[1], engine=parts[0], executor=executor, clock=clock, actor="test",
               settings=replace(SchedulerSettings(), poll_interval=600.0, started_write_delay=0.0),
               logs_folder=tmp_path / "logs", say=lambda _line: None)
    job.start()
    return job


def tries_of(sessions: Any, task_id: str) -> list[tuple[int, str]]:
    with sessions() as s:
        ti = s.scalars(select(TaskInstance).where(TaskInstance.task_id == task_id)).one()
        return [(t.try_number, t.state) for t in s.scalars(select(TaskTry).where(TaskTry.task_instance_id == ti.id)
                                                            .order_by(TaskTry.try_number))]


def run_state(sessions: Any) -> str:
    with sessions() as s:
        return s.scalars(select(DagRun.state)).one()


def test_a_run_whose_try_ended_is_decided_from_the_jobs_picture(
        tmp_path: Path, job_parts: tuple[Any, Any], statements: list[str]) -> None:  # noqa: F811
    job = a_steady_job(tmp_path, job_parts, FakeExecutor())  # no periodic full read during the test
    job.loop_once()  # reads the run, queues a
    statements.clear()
    job.loop_once()  # a succeeded: b is queued
    job.loop_once()  # b succeeded: the run succeeds
    assert states(job_parts[1]) == {"a": ("success", 1), "b": ("success", 1)}
    assert run_state(job_parts[1]) == "success"
    # the event of the run's end covers its tries' outcomes and lineage writes for the audit chain
    # (ledger/store/chain.py): each read once, in the transaction that records it, as the database holds them; no
    # other read of the run's task instances
    covers = [s for s in statements if AUDIT_COVER_READ in s]
    assert len(covers) == 1, covers
    assert len([s for s in statements if AUDIT_WRITES_READ in s]) == 1
    assert not [s for s in statements
                if AUDIT_COVER_READ not in s and any(read in s for read in READS_OF_RUNS + READS_KEPT_IN_MEMORY)]
    job.shutdown()


def test_a_failed_try_is_read_back_as_the_database_decided_it(
        tmp_path: Path, job_parts: tuple[Any, Any], statements: list[str]) -> None:  # noqa: F811
    job = a_steady_job(tmp_path, job_parts, FakeExecutor(fail={("a", 1)}))
    job.loop_once()
    statements.clear()
    job.loop_once()  # a failed with retries left: up for retry in 60 s by the job's clock, b does not start
    assert states(job_parts[1]) == {"a": ("up_for_retry", 1), "b": ("scheduled", 0)}
    assert [s for s in statements if READS_OF_RUNS[0] in s]  # the retry's due time comes from the database
    job.shutdown()


def test_what_another_process_changed_is_read_before_the_job_decides_again(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    """b is marked skipped by hand while a runs: the job's picture still has b waiting for a; it must not queue b."""
    sessions = job_parts[1]
    job = a_steady_job(tmp_path, job_parts, FakeExecutor())
    job.loop_once()  # queues a (its start and end wait in the executor)
    with sessions.begin() as session:
        run = session.scalars(select(DagRun)).one()
        spec = dag_store.spec(session, run.dag_id, run.version_hash)
        mark_tasks(session, run, spec, ["b"], TaskState.SKIPPED, downstream=False, now=CLOCK.now(), actor="someone")
    for _ in range(3):
        job.loop_once()
    assert states(job_parts[1]) == {"a": ("success", 1), "b": ("skipped", 0)}
    assert [item.task_id for item in job.executor.submitted] == ["a"]  # type: ignore[attr-defined]
    assert run_state(sessions) == "success"
    job.shutdown()


def test_a_loop_reads_the_events_only_when_another_connection_committed_since_the_last_loop(
        tmp_path: Path, job_parts: tuple[Any, Any], statements: list[str]) -> None:  # noqa: F811
    sessions = job_parts[1]
    job = a_steady_job(tmp_path, job_parts, SteppedExecutor())
    job.loop_once()  # the first loop reads them; a is queued
    reads = [s for s in statements if "FROM event WHERE event.id >" in s]
    job.loop_once()  # a started: nobody else wrote
    assert [s for s in statements if "FROM event WHERE event.id >" in s] == reads
    with sessions.begin() as session:  # another connection commits (an event comes with every change)
        run = session.scalars(select(DagRun)).one()
        spec = dag_store.spec(session, run.dag_id, run.version_hash)
        mark_tasks(session, run, spec, ["b"], TaskState.SKIPPED, downstream=False, now=CLOCK.now(), actor="someone")
    job.loop_once()
    assert len([s for s in statements if "FROM event WHERE event.id >" in s]) == len(reads) + 1
    job.shutdown()


def test_a_loop_reads_the_events_after_another_transaction_of_the_job_appended_one(
        tmp_path: Path, job_parts: tuple[Any, Any], statements: list[str]) -> None:  # noqa: F811
    """As a signal's transaction (SchedulerJob.handle_signals): one that appends no event changes nothing."""
    from ledger.store import events as event_store

    job = a_steady_job(tmp_path, job_parts, SteppedExecutor())
    job.loop_once()
    job.loop_once()

    def reads() -> int:
        return len([s for s in statements if "FROM event WHERE event.id >" in s])

    before = reads()
    with job.transaction() as session:  # on the job's own connection, no event
        session.execute(select(DagRun.id)).all()
    job.loop_once()
    assert reads() == before
    with job.transaction() as session:
        event_store.record(session, "pool_set", at=CLOCK.now(), actor="test", pool="p", slots=1)
    job.loop_once()
    assert reads() == before + 1
    job.shutdown()


def test_a_pool_changed_by_another_process_limits_the_next_queueing(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    sessions = job_parts[1]
    job = a_steady_job(tmp_path, job_parts, FakeExecutor())
    job.loop_once()  # reads the pools (none), queues a
    with sessions.begin() as session:
        set_pool(session, "default_pool", 0, "closed", now=CLOCK.now(), actor="someone")
    job.loop_once()  # a succeeded; b is ready but its pool has no room
    job.loop_once()
    assert states(sessions) == {"a": ("success", 1), "b": ("scheduled", 0)}
    job.shutdown()


def test_a_cancel_by_another_process_stops_the_try_the_job_runs(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    sessions = job_parts[1]
    job = a_steady_job(tmp_path, job_parts, KillableExecutor(parallelism=1))
    job.settings = replace(job.settings, started_write_delay=0.0)
    job.loop_once()  # queues a, which starts and keeps running
    job.loop_once()  # records its start; no request pending
    with sessions.begin() as session:
        cancel_run(session, session.scalars(select(DagRun)).one(), now=CLOCK.now(), actor="someone")
    job.loop_once()  # reads the request: kills a
    job.loop_once()  # records a's end
    assert states(sessions) == {"a": ("stopped", 1), "b": ("skipped", 0)}
    assert run_state(sessions) == "failed"
    job.shutdown()


def a_job_with_30_runs_holding_16(tmp_path: Path, parts: tuple[Any, Any]) -> DagRunJob:
    """30 due runs of a one-task daily DAG, and a started job that may hold 16 of them at a time."""
    engine, sessions = parts
    with DAG("many", schedule="@daily", start_date=pendulum.datetime(2024, 2, 9, tz="UTC"), catchup=True) as dag:
        BashTask("only", "true")
    dag.fileloc = str(tmp_path / "many.py")
    with sessions.begin() as session:
        register_dag(session, dag, now=CLOCK.now(), actor="test")
        assert len(create_due_runs(session, now=CLOCK.now(), actor="test")) == 30
    (tmp_path / "logs").mkdir()
    job = DagRunJob(sessions=sessions, engine=engine, executor=FakeExecutor(parallelism=1), clock=CLOCK,
                    settings=replace(SchedulerSettings(), max_held_runs=16, poll_interval=600.0), actor="test",
                    logs_folder=tmp_path / "logs", say=lambda _line: None)
    job.start()
    return job


def test_a_job_with_more_runs_than_it_may_hold_claims_them_in_batches_and_runs_them_all(
        tmp_path: Path, job_parts: tuple[Any, Any], statements: list[str]) -> None:  # noqa: F811
    sessions = job_parts[1]
    job = a_job_with_30_runs_holding_16(tmp_path, job_parts)
    for _ in range(100):
        job.loop_once()
    with sessions() as s:
        assert list(s.scalars(select(DagRun.state).distinct())) == ["success"]
    claims = [s for s in statements if "LEFT OUTER JOIN job AS holder" in s]
    assert 3 <= len(claims) <= 9  # the first 16, then 2 at a time (an eighth of 16), not one per finished run
    job.shutdown()


def test_the_runs_a_job_claims_join_its_list_of_held_runs_without_reading_it_again(
        tmp_path: Path, job_parts: tuple[Any, Any], statements: list[str]) -> None:  # noqa: F811
    sessions = job_parts[1]
    job = a_job_with_30_runs_holding_16(tmp_path, job_parts)
    for _ in range(100):
        job.loop_once()
        with sessions() as s:  # what it lists is what it holds
            held = set(s.scalars(select(DagRun.id).where(DagRun.lock_holder == job.job_id,
                                                         DagRun.state.in_(["queued", "running"]))))
            left = s.scalar(select(func.count()).select_from(DagRun).where(DagRun.state != "success"))
        assert job.claims.ids is None or set(job.claims.ids) == held
        if not left:
            break
    assert not left
    claims = [s for s in statements if "LEFT OUTER JOIN job AS holder" in s]
    reads = [s for s in statements if s.startswith(READS_KEPT_IN_MEMORY[0]) and "LIMIT" in s]  # (not the test's)
    assert len(reads) < len(claims)  # the first claim's list is read; later claims add to it
    job.shutdown()


def test_a_run_timed_out_by_the_job_has_its_try_stopped_at_once_and_no_stop_left_for_a_later_try(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    """The job writes the timeout's stop request itself (no other process's event): it still carries it out on the
    next loop, and the request ends with the try, so the try a later clear makes runs on."""
    sessions = job_parts[1]
    clock = FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))
    with DAG("slow", schedule="@daily", start_date=T0, catchup=True, dagrun_timeout=timedelta(seconds=30)) as slow:
        BashTask("a", "sleep 100")
    with DAG("other", schedule="@daily", start_date=T0, catchup=True) as other:  # a second held run, kept running
        BashTask("x", "sleep 100")
    slow.fileloc, other.fileloc = str(tmp_path / "slow.py"), str(tmp_path / "other.py")
    with sessions.begin() as session:
        for dag in (slow, other):
            register_dag(session, dag, now=clock.now(), actor="test")
        create_due_runs(session, now=clock.now(), actor="test")
    executor = KillableExecutor(parallelism=2)
    job = a_started_job(DagRunJob, tmp_path, job_parts, executor, clock)
    job.loop_once()  # both runs start; a and x run
    job.loop_once()
    clock.advance(seconds=31)
    job.watch.full_pass.soon()  # a run settled at its start is decided again at the next full pass
    for _ in range(3):
        job.loop_once()
    assert tries_of(sessions, "a") == [(1, "stopped")]
    with sessions.begin() as session:
        a = session.scalars(select(TaskInstance).where(TaskInstance.task_id == "a")).one()
        assert a.signal_request is None
        clear_tasks(session, session.get(DagRun, a.run_id), ["a"], downstream=False, on_latest_version=False,
                    now=clock.now(), actor="someone")
    for _ in range(4):
        job.loop_once()
    assert tries_of(sessions, "a") == [(1, "stopped"), (2, "running")]
    job.shutdown()


def a_dag_p(tmp_path: Path, u_command: str) -> DAG:
    """Daily from 2024-03-01: u >> t, t depends on its past."""
    with DAG("p", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=True) as dag:
        BashTask("u", u_command) >> BashTask("t", "true", depends_on_past=True)
    dag.fileloc = str(tmp_path / "p.py")
    return dag


def test_a_run_created_in_front_of_a_held_run_becomes_its_previous_run_for_depends_on_past(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    """A manual run on 03-05 follows the 03-01 run; the job then creates 03-02..03-09, and 03-04 becomes the manual
    run's previous run: its depends_on_past task waits for 03-04's, not for what the job remembered."""
    sessions = job_parts[1]
    with sessions.begin() as session:
        register_dag(session, a_dag_p(tmp_path, "true"), now=CLOCK.now(), actor="test")
        [first] = create_due_runs(session, now=pendulum.datetime(2024, 3, 2, 1, tz="UTC"), actor="test")
        mark_run(session, first, RunState.SUCCESS, now=CLOCK.now(), actor="test")
        manual, _ = trigger(session, dag_store.current_spec(session, "p"), pendulum.datetime(2024, 3, 5, 6, tz="UTC"),
                            None, replace=False, now=CLOCK.now(), actor="test")
        manual_id = manual.id
    executor = SteppedExecutor(parallelism=32)
    job = a_started_job(CreatingJob, tmp_path, job_parts, executor, CLOCK)
    job.loop_once()  # holds the manual run, queues its u
    job.loop_once()
    job.creating = True
    job.loop_once()  # creates 03-02 .. 03-09
    job.loop_once()
    executor.finish(next(i for i in executor.submitted if i.run_id == manual_id and i.task_id == "u"))
    job.loop_once()
    job.loop_once()
    assert not [i for i in executor.submitted if i.run_id == manual_id and i.task_id == "t"]
    job.shutdown()


def test_two_runs_chained_by_depends_on_past_are_both_marked_in_one_loop(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    """u fails in both runs in the same loop: t, which depends on its past, is upstream_failed in both, decided in
    one plan (the first run's mark makes the job forget its successor's picture: it is read again, not updated)."""
    sessions = job_parts[1]
    with sessions.begin() as session:
        register_dag(session, a_dag_p(tmp_path, "false"), now=CLOCK.now(), actor="test")
        assert len(create_due_runs(session, now=pendulum.datetime(2024, 3, 3, 1, tz="UTC"), actor="test")) == 2
    job = a_started_job(DagRunJob, tmp_path, job_parts, FakeExecutor(parallelism=4, fail={("u", 1)}), CLOCK)
    for _ in range(6):
        job.loop_once()
    with sessions() as s:
        found = sorted((ti.run_id, ti.task_id, ti.state) for ti in s.scalars(select(TaskInstance)))
        assert [(task, state) for _run, task, state in found] == [("t", "upstream_failed"), ("u", "failed")] * 2
        assert set(s.scalars(select(DagRun.state))) == {"failed"}
    job.shutdown()


def test_a_full_pass_while_nobody_else_wrote_decides_the_held_runs_again_without_reading_them(
        tmp_path: Path, job_parts: tuple[Any, Any], statements: list[str]) -> None:  # noqa: F811
    """On SQLite, when no other connection committed since the last loop, the database holds only what the job wrote
    itself: the periodic pass decides every held run again from its picture (decision 0303). Once another connection
    has committed, it reads them again."""
    sessions = job_parts[1]
    job = a_steady_job(tmp_path, job_parts, SteppedExecutor())
    job.loop_once()  # reads the run, queues a
    job.loop_once()
    passes = job.memory.forgotten["another process wrote, or a poll interval passed"]
    statements.clear()
    job.watch.full_pass.soon()
    job.loop_once()
    assert not job.watch.full_pass.due()  # the pass was made
    assert not [s for s in statements if any(read in s for read in READS_OF_RUNS)]
    assert job.memory.forgotten["another process wrote, or a poll interval passed"] == passes
    with sessions.begin() as session:
        set_pool(session, "p", 3, "", now=CLOCK.now(), actor="someone")
    job.watch.full_pass.soon()
    job.loop_once()
    assert [s for s in statements if READS_OF_RUNS[1] in s]
    assert job.memory.forgotten["another process wrote, or a poll interval passed"] == passes + 1
    job.shutdown()
