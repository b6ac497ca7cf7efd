"""scheduler/loop/adoption.py on a real SQLite database: an executor's remarks become events naming the task's DAG and
run; a dead job's tries are looked for outside the job's transactions, then adopted or lost."""

from __future__ import annotations

import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pendulum
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ledger import DAG, BashTask
from ledger.infra.clock import FixedClock
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.infra.workers import task_id
from ledger.models import Event, Job, TaskInstance, TaskTry
from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.loop import adoption
from ledger.scheduler.loop.job import DagRunJob
from ledger.services.operations import trigger_dag
from ledger.services.sync import register_dag
from ledger.store import events as event_store
from ledger.store import identity as identity_store
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_held_starts import SteppedExecutor

NOW = datetime(2024, 3, 1, tzinfo=UTC)


class Remarking(FakeExecutor):
    def __init__(self, remarks: list[dict[str, Any]]) -> None:
        super().__init__(1)
        self.pending = remarks

    def remarks(self) -> list[dict[str, Any]]:
        out, self.pending = self.pending, []
        return out


def test_a_refused_redelivery_is_recorded_as_an_event_once(session: Session) -> None:
    executor = Remarking([{"kind": "try_redelivery_refused", "ti_id": 999, "try_number": 1, "host": "w2",
                           "reason": "a redelivered message for try 1 was refused by worker w2: w1 had started it"}])
    adoption.record_remarks(session, executor, actor="scheduler:1@test", now=NOW)
    adoption.record_remarks(session, executor, actor="scheduler:1@test", now=NOW)  # nothing new: nothing written
    rows = event_store.listing(session, kinds=["try_redelivery_refused"])
    assert len(rows) == 1
    assert rows[0].details["host"] == "w2" and "w1 had started it" in rows[0].details["reason"]


def test_a_refusal_of_another_databases_try_is_not_recorded_here(session: Session) -> None:
    """Workers share the list of refusals in Redis: one whose Celery task id is not what this database names the
    try (a database made again against the same Redis, whose ids start at 1 again) is another's (decision 0344)."""
    identity = identity_store.read(session)
    ours = task_id(999, 1, identity.of(999))
    refused = {"kind": "try_redelivery_refused", "ti_id": 999, "try_number": 1, "host": "w2", "reason": "refused"}
    executor = Remarking([{**refused, "celery_task_id": "ledger-xxxxxxxx-999-1"}, {**refused, "celery_task_id": ours}])
    adoption.record_remarks(session, executor, actor="scheduler:1@test", now=NOW)
    rows = event_store.listing(session, kinds=["try_redelivery_refused"])
    assert [row.details["celery_task_id"] for row in rows] == [ours]


class Finding(FakeExecutor):
    """Finds the dead job's try of task `a` where it runs. Its find notes whether the database was free meanwhile
    (another connection could take SQLite's write lock at once); its follow notes what the job adopted."""

    def __init__(self, db: str, parallelism: int = 4) -> None:
        super().__init__(parallelism)
        self.db = db
        self.looks: list[tuple[list[str], bool]] = []
        self.followed: list[dict[int, Any]] = []

    def find(self, tries: list[tuple[WorkItem, bool]]) -> dict[int, Any]:
        other = sqlite3.connect(self.db, timeout=0)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.rollback()
            free = True
        except sqlite3.OperationalError:  # "database is locked": a transaction of the job holds it
            free = False
        finally:
            other.close()
        self.looks.append((sorted(item.task_id for item, _started in tries), free))
        return {item.ti_id: "found" for item, started in tries if item.task_id == "a" and started}

    def follow(self, found: dict[int, Any]) -> None:
        if found:
            self.followed.append(found)
            self._busy.update(found)  # (followed like a remote try: it takes a slot until it ends)


def a_dead_jobs_running_tries(tmp_path: Path, sessions: Any) -> int:
    """A DAG of two independent tasks whose tries a job started; then that job's process is gone (kill -9)."""
    with DAG("d", schedule=None, start_date=NOW) as dag:
        BashTask("a", "true")
        BashTask("b", "true")
    dag.fileloc = str(tmp_path / "d.py")
    with sessions.begin() as session:
        register_dag(session, dag, now=NOW, actor="test")
        trigger_dag(session, "d", "2024-03-01", None, replace=False, now=pendulum.instance(NOW), actor="test")
    first = job_on(tmp_path, sessions, SteppedExecutor(4))
    first.start()
    for _ in range(3):
        first.loop_once()
    with sessions() as session:
        assert session.scalars(select(TaskInstance.state)).all() == ["running", "running"]
    kill_9(sessions, first.job_id)
    return first.job_id


def kill_9(sessions: Any, job_id: int) -> None:
    """The job's process is gone, as after kill -9: its row names a process id that no longer exists."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    with sessions.begin() as session:
        session.execute(update(Job).where(Job.id == job_id).values(pid=gone.pid))


def job_on(tmp_path: Path, sessions: Any, executor: FakeExecutor) -> DagRunJob:
    (tmp_path / "logs").mkdir(exist_ok=True)
    return DagRunJob(sessions=sessions, engine=sessions.kw["bind"], settings=SchedulerSettings(), executor=executor,
                     clock=FixedClock(NOW), actor="test", logs_folder=tmp_path / "logs", say=lambda _line: None)


def test_a_dead_jobs_tries_are_looked_for_between_transactions_then_adopted_or_lost(
        tmp_path: Path, sessions: Any) -> None:
    """The house rule (no I/O inside a transaction) for adoption: the executor looks for a dead job's tries (Redis,
    report files) while no transaction of the job holds the database; the next transaction adopts what it found
    (followed once that commits) and records the rest lost, each with a new try."""
    dead = a_dead_jobs_running_tries(tmp_path, sessions)
    executor = Finding(sessions.kw["bind"].url.database)
    job = job_on(tmp_path, sessions, executor)
    job.start()
    try:
        job.loop_once()  # takes the runs over and offers the two tries
        job.loop_once()  # looked for, then settled
        job.loop_once()
    finally:
        job.shutdown()
    assert executor.looks == [(["a", "b"], True)]  # once, with the database free
    with sessions() as session:
        tis = {t.task_id: t for t in session.scalars(select(TaskInstance))}
        assert executor.followed == [{tis["a"].id: "found"}]
        assert (tis["a"].job_id, tis["a"].try_number) == (job.job_id, 1)
        assert tis["b"].try_number == 2  # lost, and a new try that spent no retry
        tries = {(tr.task_instance_id, tr.try_number): tr.state for tr in session.scalars(select(TaskTry))}
        assert tries[(tis["b"].id, 1)] == "lost"
        adopted = session.scalars(select(Event).where(Event.kind == "try_adopted")).all()
        assert [(e.details["task_id"], e.details["job_id"]) for e in adopted] == [("a", job.job_id)]
        lost = session.scalars(select(Event).where(Event.kind == "try_lost")).all()
        assert [e.details["task_id"] for e in lost if "its job stopped heart-beating" in e.details["reason"]] == ["b"]
    assert dead != job.job_id


def test_a_job_that_dies_between_offering_and_settling_leaves_the_tries_to_the_next_job_as_they_were(
        tmp_path: Path, sessions: Any) -> None:
    """The transaction that takes the runs over only offers their tries: a job killed before the next one leaves
    them the dead job's, and the job after it adopts and loses them as the first would have."""
    a_dead_jobs_running_tries(tmp_path, sessions)
    db = sessions.kw["bind"].url.database
    killed = Finding(db)
    second = job_on(tmp_path, sessions, killed)
    second.start()
    second.loop_once()  # takes the runs over and offers the two tries; then its process is gone
    kill_9(sessions, second.job_id)
    with sessions() as session:
        assert session.scalars(select(TaskInstance.state)).all() == ["running", "running"]
        assert session.scalar(select(func.count()).select_from(Event).where(Event.kind == "try_lost")) == 0
    executor = Finding(db)
    third = job_on(tmp_path, sessions, executor)
    third.start()
    try:
        third.loop_once()
        third.loop_once()
    finally:
        third.shutdown()
    assert killed.looks == [] and killed.followed == []
    assert executor.looks == [(["a", "b"], True)]
    with sessions() as session:
        tis = {t.task_id: t for t in session.scalars(select(TaskInstance))}
        assert executor.followed == [{tis["a"].id: "found"}] and tis["b"].try_number == 2
        adopted = session.scalars(select(Event).where(Event.kind == "try_adopted")).all()
        assert [(e.details["task_id"], e.details["job_id"]) for e in adopted] == [("a", third.job_id)]


def test_a_try_adopted_in_a_transaction_counts_against_the_slots_that_transaction_fills(
        tmp_path: Path, sessions: Any) -> None:
    """The adopted try is followed once the transaction commits, and then takes an executor slot: the same
    transaction queues no more tries than the slots left beside it (one slot: b's new try waits for a's end,
    instead of being handed to an executor with no slot)."""
    a_dead_jobs_running_tries(tmp_path, sessions)
    executor = Finding(sessions.kw["bind"].url.database, parallelism=1)
    job = job_on(tmp_path, sessions, executor)
    job.start()
    try:
        for _ in range(3):
            job.loop_once()
        with sessions() as session:
            tis = {t.task_id: t for t in session.scalars(select(TaskInstance))}
        assert executor.followed == [{tis["a"].id: "found"}] and executor.submitted == []
        assert (tis["b"].state, tis["b"].try_number) == ("scheduled", 1)  # lost, its new try waiting for a slot
    finally:
        job.shutdown()
