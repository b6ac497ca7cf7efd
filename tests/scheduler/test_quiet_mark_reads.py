"""On SQLite, a scheduler's per-second reads that only another process's commit can change are not read again while
nobody else committed (decision 0309): the callbacks' claim, the scheduling pass's schedulable DAGs and resume points,
the empty signal index. Once another connection commits, or the job itself locks a timeline, they are read again;
verify mode reads them again and stops on a difference (in process: a real SQLite file, the scheduler job without its
DAG file processes, a fixed clock)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pendulum
import pytest
from sqlalchemy.orm import Session

from ledger import DAG, BashTask
from ledger.infra.clock import FixedClock
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.scheduler.loop.memory import MemoryMismatch
from ledger.services.operations import set_pool
from ledger.services.sync import register_dag
from ledger.store import runs as run_store
from scheduler.loop.loop_report import LoopReport
from scheduler.loop.scheduler_job import SchedulerJob
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import job_parts  # noqa: F401  (a fixture)
from tests.statements import statements_on

CLOCK = FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))
CLAIM = "FROM callback"
SCHEDULABLE = "FROM dag WHERE dag.is_active"
RESUME = "max(dag_run.logical_date)"


@pytest.fixture(autouse=True)
def _no_verify_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count what a loop reads: verify mode's reads are not the loop's (one test turns it on itself)."""
    monkeypatch.setenv("LEDGER_VERIFY_MEMORY", "0")


def a_scheduler(tmp_path: Path, parts: tuple[Any, Any], **settings: Any) -> SchedulerJob:
    """A scheduler job on the test's database holding a daily DAG `d` whose one due run (2024-03-09) is created by
    the first scheduling pass."""
    with DAG("d", schedule="@daily", start_date=pendulum.datetime(2024, 3, 9, tz="UTC"), catchup=True) as dag:
        BashTask("a", "true")
    dag.fileloc = str(tmp_path / "d.py")
    with parts[1].begin() as session:
        register_dag(session, dag, now=CLOCK.now(), actor="test")
    (tmp_path / "logs").mkdir()
    return SchedulerJob(sessions=parts[1], engine=parts[0], settings=replace(SchedulerSettings(), **settings),
                        executor=FakeExecutor(), clock=CLOCK, actor="test", logs_folder=tmp_path / "logs",
                        say=lambda _line: None, dags_folder=tmp_path / "dags")


def in_a_loop(job: SchedulerJob, step: Callable[[Session], Any]) -> Any:
    """`step` inside a loop's transaction, with the loop's look at others' writes before it (DagRunJob's own)."""
    with job.transaction(loop=True) as session:
        job.effects.seen = job.watch.look(session, job.connection.kept)
        done = step(session)
    return done


def scheduling_pass(job: SchedulerJob) -> Callable[[Session], int]:
    def step(session: Session) -> int:
        job._scheduling.soon()
        return job.create_runs(session, CLOCK.now())
    return step


def another_process_writes(sessions: Any) -> None:
    with sessions.begin() as session:
        set_pool(session, "p", 3, "", now=CLOCK.now(), actor="someone")


def test_a_scheduling_pass_while_nobody_else_wrote_reads_neither_the_dags_nor_their_resume_points(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    engine, sessions = job_parts
    job = a_scheduler(tmp_path, job_parts)
    assert in_a_loop(job, scheduling_pass(job)) == 1  # 2024-03-09 created: the job locked the timeline
    with statements_on(engine) as seen:
        assert in_a_loop(job, scheduling_pass(job)) == 0
    assert any(SCHEDULABLE in s for s in seen) and any(RESUME in s for s in seen)  # read after its own run creation
    with statements_on(engine) as seen:
        assert in_a_loop(job, scheduling_pass(job)) == 0
    assert not [s for s in seen if SCHEDULABLE in s or RESUME in s]
    another_process_writes(sessions)
    with statements_on(engine) as seen:
        assert in_a_loop(job, scheduling_pass(job)) == 0
    assert any(SCHEDULABLE in s for s in seen) and any(RESUME in s for s in seen)


def test_a_timeline_the_job_locked_itself_has_its_resume_points_read_again(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    engine = job_parts[0]
    job = a_scheduler(tmp_path, job_parts)
    in_a_loop(job, scheduling_pass(job))
    in_a_loop(job, scheduling_pass(job))
    in_a_loop(job, lambda session: run_store.lock_timeline(session, "d"))  # (a run restored, displaced, made)
    with statements_on(engine) as seen:
        in_a_loop(job, scheduling_pass(job))
    assert any(RESUME in s for s in seen)


def test_a_callbacks_claim_while_nobody_else_wrote_reads_nothing(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    engine, sessions = job_parts
    job = a_scheduler(tmp_path, job_parts)

    def claim(session: Session) -> Any:
        job.callbacks._claims.next_at = 0.0  # the claim's cadence is due
        return job.callbacks.due(session, CLOCK.now(), job_id=1, actor="test", locate=job._locate,
                                 quiet=job.watch.quiet_mark())

    in_a_loop(job, claim)
    with statements_on(engine) as seen:
        assert in_a_loop(job, claim) == []
    assert not [s for s in seen if CLAIM in s]
    another_process_writes(sessions)  # (it might have requested a call)
    with statements_on(engine) as seen:
        in_a_loop(job, claim)
    assert [s for s in seen if CLAIM in s]


def test_an_empty_signal_index_is_not_read_again_while_nobody_else_wrote(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    engine, sessions = job_parts
    job = a_scheduler(tmp_path, job_parts)
    job._signal_index = {}
    job._index_cadence.done()

    def rebuild(session: Session) -> None:
        job._index_cadence.next_at = 0.0  # the index's rebuild is due
        job.in_loop(session, CLOCK.now(), LoopReport())

    in_a_loop(job, rebuild)
    with statements_on(engine) as seen:
        in_a_loop(job, rebuild)
    assert not [s for s in seen if SCHEDULABLE in s]
    another_process_writes(sessions)
    with statements_on(engine) as seen:
        in_a_loop(job, rebuild)
    assert [s for s in seen if SCHEDULABLE in s]


def test_verify_mode_stops_on_scheduling_reads_that_differ_from_the_database(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job = a_scheduler(tmp_path, job_parts, verify_memory=True)
    in_a_loop(job, scheduling_pass(job))
    in_a_loop(job, scheduling_pass(job))
    assert in_a_loop(job, scheduling_pass(job)) == 0  # kept, and the same as the database
    job._reads.resume = {}  # as if the job had missed a change
    with pytest.raises(MemoryMismatch):
        in_a_loop(job, scheduling_pass(job))
