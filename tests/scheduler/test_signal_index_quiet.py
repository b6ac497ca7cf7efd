"""A scheduler with no task listening to signals rebuilds its signal index and moves its signal cursor inside
its loop's transaction, not in a transaction of its own before each loop (in process: a real SQLite file, the
scheduler job without its DAG file processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
from sqlalchemy import select

from ledger import DAG, BashTask
from ledger.infra.clock import FixedClock
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.models import DagRun
from ledger.services.sync import register_dag
from ledger.store import signals as signal_store
from scheduler.loop.loop_report import LoopReport
from scheduler.loop.scheduler_job import SchedulerJob
from scheduler.signals.signal_actions import CURSOR_KEY, LISTENER
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import job_parts  # noqa: F401  (a fixture)
from tests.statements import statements_on

CLOCK = FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))


def a_scheduler(tmp_path: Path, parts: tuple[Any, Any]) -> SchedulerJob:
    (tmp_path / "logs").mkdir()
    return SchedulerJob(sessions=parts[1], engine=parts[0], settings=SchedulerSettings(), executor=FakeExecutor(),
                        clock=CLOCK, actor="test", logs_folder=tmp_path / "logs", say=lambda _line: None,
                        dags_folder=tmp_path / "dags")


def test_with_no_listener_the_signal_cursor_moves_in_the_loops_transaction_not_one_of_its_own(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    engine, sessions = job_parts
    job = a_scheduler(tmp_path, job_parts)
    assert job.handle_signals(LoopReport()) == []  # the first index: read in a transaction of its own (empty)
    with sessions.begin() as session:
        sent = signal_store.send(session, "orders.ready", "1", sender="test", now=CLOCK.now())
    job._index_cadence.next_at = job._signal_skip.next_at = 0.0  # both due again
    with statements_on(engine) as seen:
        assert job.handle_signals(LoopReport()) == []
    assert seen == []  # no transaction before the loop's
    report = LoopReport()
    with job.transaction(loop=True) as session:
        job.in_loop(session, CLOCK.now(), report)
    assert not report.again
    with sessions() as session:
        assert signal_store.cursor(session, LISTENER, CURSOR_KEY) == sent.id


def test_a_dag_that_comes_to_listen_has_its_signal_handled_before_the_next_loop(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    sessions = job_parts[1]
    job = a_scheduler(tmp_path, job_parts)
    job.handle_signals(LoopReport())  # no listener yet
    with DAG("sig", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
        BashTask("once", "true", signals={"go": "START"})
    dag.fileloc = str(tmp_path / "sig.py")
    with sessions.begin() as session:  # another process registers it, then a signal comes
        register_dag(session, dag, now=CLOCK.now(), actor="test")
        signal_store.send(session, "go", "1", sender="test", now=CLOCK.now())
    job._index_cadence.next_at = 0.0  # the index's rebuild is due
    report = LoopReport()
    with job.transaction(loop=True) as session:
        job.in_loop(session, CLOCK.now(), report)
    assert report.again  # the loop goes on at once
    job.handle_signals(LoopReport())  # the next loop handles the signal first: a run created for it
    with sessions() as session:
        runs = session.scalars(select(DagRun).where(DagRun.dag_id == "sig")).all()
    assert len(runs) == 1
