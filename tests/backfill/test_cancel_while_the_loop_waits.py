"""A backfill's cancel that commits while a job's loop waits for the database: the runs the loop then ends for it
end after the cancel, so their dates get back the runs they displaced (decision 0210). In process: a real SQLite
file, a job with a fake executor, and a clock of the test's that plays the other process: the moment the job reads
it while the job holds no transaction, the cancel commits (as `ledger backfill cancel` does in its own
transaction), a second later than the time the read returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
from pendulum import DateTime
from sqlalchemy import select

from ledger import DAG, BashTask
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.models import DagRun
from ledger.scheduler.loop.job import DagRunJob
from ledger.scheduler.loop.scheduling import create_due_runs
from ledger.services.operations import backfill_request, plan_backfill, stop_backfill, submit_backfill
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import job_parts  # noqa: F401  (a fixture)


class CancelWhenFree:
    """The job's clock. Once armed, the first read made while the job holds no transaction returns the time, then
    the cancel commits one second later on another connection (it could not while the job held the write lock)."""

    def __init__(self, start: DateTime, sessions: Any) -> None:
        self.current, self.sessions = start, sessions
        self.job: DagRunJob | None = None
        self.backfill_id: int | None = None
        self.cancelled_at: DateTime | None = None

    def now(self) -> DateTime:
        read = self.current
        kept = self.job.connection.kept if self.job is not None else None
        if self.backfill_id is not None and not (kept is not None and kept.in_transaction()):
            self.cancel()
        return read

    def cancel(self) -> None:
        assert self.backfill_id is not None
        self.current = self.current.add(seconds=1)
        with self.sessions.begin() as session:
            stop_backfill(session, self.backfill_id, now=self.current, actor="cli", stale_after=60)
        self.backfill_id, self.cancelled_at = None, self.current


def live_by_date(sessions: Any) -> dict[str, tuple[int, str]]:
    with sessions() as s:
        runs = s.scalars(select(DagRun).where(DagRun.state != "overridden")).all()
        return {r.logical_date.date().isoformat(): (r.id, r.state) for r in runs}


def test_runs_a_loop_ends_for_a_cancel_that_committed_while_it_waited_give_their_dates_back(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    engine, sessions = job_parts
    clock = CancelWhenFree(pendulum.datetime(2024, 3, 4, 12, tz="UTC"), sessions)
    with DAG("d", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
             end_date=pendulum.datetime(2024, 3, 3, tz="UTC"), catchup=True) as dag:
        BashTask("a", "true") >> BashTask("b", "true")
    dag.fileloc = str(tmp_path / "d.py")
    with sessions.begin() as session:
        register_dag(session, dag, now=clock.now(), actor="test")
        assert len(create_due_runs(session, now=clock.now(), actor="test")) == 3
    (tmp_path / "logs").mkdir()
    job = clock.job = DagRunJob(sessions=sessions, engine=engine, settings=SchedulerSettings(),
                                executor=FakeExecutor(), clock=clock, actor="test", logs_folder=tmp_path / "logs",
                                say=lambda _line: None)
    job.start()
    for _ in range(6):
        job.loop_once()
    green = live_by_date(sessions)
    assert {state for _id, state in green.values()} == {"success"}
    with sessions.begin() as session:  # another process: `ledger backfill ... --reprocess completed --submit`
        request = backfill_request(dag_store.current_spec(session, "d"), "2024-03-01", "2024-03-03",
                                   reprocess="completed", max_active_runs=1, submit=True, requested_by="test")
        _spec, plan = plan_backfill(session, request, now=clock.now(), stale_after=60)
        backfill_id = submit_backfill(session, request, plan, now=clock.now(), actor="test",
                                      stale_after=60).backfill_id
    job.loop_once()  # claims the backfill's three runs, starts the first: the other two stay queued, held
    with sessions() as s:
        held = s.scalars(select(DagRun.state).where(DagRun.backfill_id == backfill_id,
                                                    DagRun.lock_holder == job.job_id)).all()
    assert sorted(held) == ["queued", "queued", "running"]
    clock.backfill_id = backfill_id  # the cancel commits the first moment the job's clock is read outside a transaction
    job.loop_once()
    if clock.cancelled_at is None:  # the loop read the clock only inside its transaction: the cancel comes after it
        clock.cancel()
    for _ in range(6):
        job.loop_once()
    with sessions() as s:
        ended = s.execute(select(DagRun.id, DagRun.ended_at).where(DagRun.backfill_id == backfill_id)).all()
    assert all(pendulum.instance(at, tz="UTC") >= clock.cancelled_at for _id, at in ended), ended
    live = live_by_date(sessions)  # (the first run's tries all succeeded when the cancel came late: it stays)
    assert {d: live[d] for d in ("2024-03-02", "2024-03-03")} == {d: green[d] for d in ("2024-03-02", "2024-03-03")}
    job.shutdown()
