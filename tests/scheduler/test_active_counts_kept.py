"""A job keeps a bound of each DAG's task instances queued or running (max_active_tasks) while nobody else writes,
instead of counting them in every loop that queues tries (decision 0329): the bound is what it read plus what it
queued since, and it counts again when another process wrote or when the bound could refuse a candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
import pytest
from sqlalchemy import text

from ledger import DAG, BashTask
from ledger.scheduler.loop.job import DagRunJob
from ledger.scheduler.loop.memory import MemoryMismatch
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import job_parts  # noqa: F401  (a fixture)
from tests.scheduler.test_task_limits import started_job
from tests.statements import statements_on

CLOCK_NOW = pendulum.datetime(2024, 3, 10, 12, tz="UTC")
ACTIVE_READ = "SELECT task_instance.dag_id, count(*) AS count_1 FROM task_instance WHERE task_instance.state IN"


def a_job(tmp_path: Path, parts: tuple[Any, Any], *, tasks: int, limit: int, runs: int, parallelism: int,
          held: int, verify: bool = False) -> tuple[DagRunJob, FakeExecutor]:
    """`runs` due runs of a daily DAG of `tasks` independent tasks with max_active_tasks `limit`, and a started job
    that holds `held` of them, with `parallelism` slots (each try ends in the loop after it was queued)."""
    start = pendulum.datetime(2024, 3, 1, tz="UTC")
    with DAG("wide", schedule="@daily", start_date=start, end_date=start.add(days=runs - 1), catchup=True,
             max_active_tasks=limit) as dag:
        for n in range(tasks):
            BashTask(f"t{n}", "true")
    return started_job(tmp_path, parts, dag, runs=runs, parallelism=parallelism, max_held_runs=held,
                       verify_memory=verify)


def active(sessions: Any) -> int:
    with sessions() as s:
        return int(s.execute(text("SELECT count(*) FROM task_instance WHERE dag_id = 'wide' "
                                  "AND state IN ('queued', 'running')")).scalar_one())


def test_a_job_alone_counts_the_active_task_instances_in_few_of_its_loops(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    engine, _sessions = job_parts
    job, executor = a_job(tmp_path, job_parts, tasks=30, limit=16, runs=1, parallelism=1, held=1)
    with statements_on(engine) as seen:
        for _ in range(200):
            job.loop_once()
            if len(executor.submitted) == 30 and not executor.in_flight():
                break
        reads = sum(s.startswith(ACTIVE_READ) for s in seen)
    job.shutdown()
    assert len(executor.submitted) == 30
    assert reads <= 3  # read when the bound (what was read, plus the tries queued since) nears the limit of 16


def test_another_process_making_task_instances_active_is_counted_before_the_next_try_is_queued(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    _engine, sessions = job_parts
    job, executor = a_job(tmp_path, job_parts, tasks=6, limit=4, runs=2, parallelism=2, held=1)
    job.loop_once()
    assert len(executor.submitted) == 2 and active(sessions) == 2  # counted: 0; kept: at most 2
    with sessions.begin() as s:  # another scheduler queues three tries of the run this job does not hold
        s.execute(text("UPDATE task_instance SET state = 'queued' WHERE id IN (SELECT ti.id FROM task_instance ti "
                       "JOIN dag_run r ON r.id = ti.run_id WHERE r.lock_holder IS NULL ORDER BY ti.id LIMIT 3)"))
    job.loop_once()  # records the two ends (3 active); the kept bound (2) plus its 2 slots would allow 2 more
    assert len(executor.submitted) == 3 and active(sessions) == 4
    job.shutdown()


def test_verify_mode_finds_a_kept_bound_below_what_the_database_holds(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, executor = a_job(tmp_path, job_parts, tasks=30, limit=16, runs=1, parallelism=1, held=1, verify=True)
    for _ in range(200):  # until the job keeps a bound (verify mode checks it each loop meanwhile)
        job.loop_once()
        if job.facts.active and executor.in_flight():
            break
    job.facts.active["wide"] = -1  # a wrong memory: one fewer than the database holds
    with pytest.raises(MemoryMismatch, match="DAG wide: remembered at most 0 task instances queued or running, "
                                             "the database says 1"):
        job.loop_once()
    job.shutdown()


def test_a_starts_fast_path_counts_what_another_process_made_active_since_the_last_loop(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    from sqlalchemy import select

    from ledger.models import DagRun, TaskInstance
    from ledger.scheduler.loop.loop_report import LoopReport
    from ledger.scheduler.loop.queueing import queue_tries
    from ledger.store import dags as dag_store
    from ledger.store import tasks as task_store

    _engine, sessions = job_parts
    job, executor = a_job(tmp_path, job_parts, tasks=30, limit=16, runs=2, parallelism=2, held=1)
    for _ in range(50):  # until the job keeps a bound with tries in flight
        job.loop_once()
        if job.facts.active and job.facts.active_mark is not None and executor.in_flight():
            break
    assert job.facts.active_mark is not None and active(sessions) == 2
    with sessions.begin() as s:  # another process (a backfill, a second scheduler) queues 13 of the other run
        s.execute(text("UPDATE task_instance SET state = 'queued' WHERE id IN (SELECT ti.id FROM task_instance ti "
                       "JOIN dag_run r ON r.id = ti.run_id WHERE r.lock_holder IS NULL ORDER BY ti.id LIMIT 13)"))
    executor.drain()  # the job's two tries ended, their ends not recorded yet: two slots open, 15 active of 16
    executor._busy.clear()
    with job.transaction() as s:  # as SchedulerJob.handle_signals queues a START's tries, before the next loop
        run = s.scalars(select(DagRun).where(DagRun.lock_holder == job.job_id)).one()
        spec = dag_store.current_spec(s, "wide")
        waiting = s.scalars(select(TaskInstance).where(TaskInstance.run_id == run.id, TaskInstance.state.is_(None)
                                                    | (TaskInstance.state == "scheduled")))
        work = queue_tries(job, s, [(task_store.row_of(ti), run, spec) for ti in waiting], CLOCK_NOW, LoopReport())
    assert len(work) == 1 and active(sessions) == 16
    job.shutdown()
