"""Events a job writes about other jobs name the DAG and run they concern, so that `ledger events --dag/--run`
finds them."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pendulum
from sqlalchemy import select, update

from ledger import DAG, BashTask
from ledger.infra.clock import FixedClock
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.models import DagRun, Event
from ledger.scheduler.loop.job import DagRunJob
from ledger.scheduler.loop.scheduling import create_due_runs
from ledger.services.sync import register_dag
from ledger.store import jobs as job_store
from tests.scheduler.fakes import FakeExecutor

T0 = pendulum.datetime(2024, 3, 8, tz="UTC")


def test_a_killed_jobs_death_is_one_event_per_run_it_held(tmp_path: Path, sessions: Any) -> None:
    clock = FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))
    with DAG("d", schedule="@daily", start_date=T0, catchup=True) as dag:
        BashTask("a", "true")
    dag.fileloc = str(tmp_path / "d.py")
    gone = subprocess.Popen(["true"])  # a process id that no longer exists: a scheduler killed with kill -9
    gone.wait()
    with sessions.begin() as session:
        register_dag(session, dag, now=clock.now(), actor="test")
        runs = create_due_runs(session, now=clock.now(), actor="test")
        assert len(runs) == 2  # 2024-03-08 and 2024-03-09
        killed = job_store.start_job(session, "scheduler", now=clock.now())
        killed.pid = gone.pid
        session.execute(update(DagRun).values(lock_holder=killed.id))
        held = {(r.dag_id, r.id) for r in runs}
        killed_id = killed.id
    (tmp_path / "logs").mkdir()
    job = DagRunJob(sessions=sessions, engine=sessions.kw["bind"], settings=SchedulerSettings(),
                    executor=FakeExecutor(), clock=clock, actor="test", logs_folder=tmp_path / "logs",
                    say=lambda _line: None)
    job.start()
    try:
        job.loop_once()
    finally:
        job.shutdown()
    with sessions() as session:
        died = list(session.scalars(select(Event).where(Event.kind == "job_died")))
    assert {(e.dag_id, e.run_id) for e in died} == held
    assert all(e.details["job_id"] == killed_id for e in died)
