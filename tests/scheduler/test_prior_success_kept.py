"""A job reads each held run's prior successful run (`prev_*_success`) once and keeps it up to date as its own runs
succeed, instead of reading it in every loop that queues tries (issue 43): each try still gets what the database
says when it is queued."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger import DAG, BashTask
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.scheduler.loop.job import DagRunJob
from ledger.scheduler.loop.memory import MemoryMismatch
from ledger.scheduler.loop.scheduling import create_due_runs
from ledger.services.sync import register_dag
from ledger.store.prior_runs import prior_successes
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import job_parts  # noqa: F401  (a fixture)
from tests.statements import statements_on

CLOCK_NOW = pendulum.datetime(2024, 3, 10, 12, tz="UTC")
PRIOR_READ = "dag_run_2.data_interval_start, dag_run_2.data_interval_end, dag_run_2.started_at"


def a_job_with_chained_runs(tmp_path: Path, parts: tuple[Any, Any], *,
                            verify: bool = False) -> tuple[DagRunJob, FakeExecutor]:
    """20 due runs of a daily DAG a >> b, and a started job that holds 8 of them at a time, one try at a time (in
    verify mode when asked: its checks read the prior successes again, which the read counts here must not see)."""
    from ledger.infra.clock import FixedClock

    engine, sessions = parts
    clock = FixedClock(CLOCK_NOW)
    with DAG("chained", schedule="@daily", start_date=pendulum.datetime(2024, 2, 19, tz="UTC"), catchup=True) as dag:
        BashTask("a", "true") >> BashTask("b", "true")
    dag.fileloc = str(tmp_path / "chained.py")
    with sessions.begin() as session:
        register_dag(session, dag, now=clock.now(), actor="test")
        assert len(create_due_runs(session, now=clock.now(), actor="test")) == 20
    (tmp_path / "logs").mkdir()
    executor = FakeExecutor(parallelism=1)
    job = DagRunJob(sessions=sessions, engine=engine, executor=executor, clock=clock,
                    settings=replace(SchedulerSettings(), max_held_runs=8, poll_interval=600.0, verify_memory=verify),
                    actor="test",
                    logs_folder=tmp_path / "logs", say=lambda _line: None)
    job.start()
    return job, executor


def test_each_try_gets_the_prior_success_the_database_holds_when_it_is_queued(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    engine, sessions = job_parts
    job, executor = a_job_with_chained_runs(tmp_path, job_parts)
    checked = reads = 0
    with statements_on(engine) as seen:
        for _ in range(200):
            before, read_before = len(executor.submitted), len(seen)
            job.loop_once()
            reads += sum(PRIOR_READ in s for s in seen[read_before:])
            new = executor.submitted[before:]
            with sessions() as s:  # nothing else writes between the loop's commit and this read
                truth = prior_successes(s, {item.run_id for item in new})
            for item in new:
                assert item.prev_success == truth.get(item.run_id), (item.run_id, item.task_id)
                checked += 1
            if len(executor.submitted) == 40 and not executor.in_flight():
                break
    job.shutdown()
    assert checked == 40
    assert sum(item.prev_success is not None for item in executor.submitted) >= 30  # most had one
    assert reads <= 20  # read once per run at most (in batches), not in each of the loops that queued a try


def test_verify_mode_finds_a_kept_prior_success_the_database_does_not_hold(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, _executor = a_job_with_chained_runs(tmp_path, job_parts, verify=True)
    for _ in range(200):  # until some held run has a prior success kept (verify mode checks each loop meanwhile)
        job.loop_once()
        if any(kept[3] is not None for kept in job.facts.prior.values()):
            break
    run_id, (dag_id, at, date, kept) = next((i, k) for i, k in job.facts.prior.items() if k[3] is not None)
    assert kept is not None
    job.facts.prior[run_id] = (dag_id, at, date, ("2000-01-01T00:00:00+00:00", *kept[1:]))  # a wrong memory
    with pytest.raises(MemoryMismatch, match=f"run {run_id}: remembered prior success"):
        job.loop_once()
    job.shutdown()


def test_verify_mode_finds_a_kept_logical_date_the_database_does_not_hold(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    job, _executor = a_job_with_chained_runs(tmp_path, job_parts, verify=True)
    for _ in range(200):  # until the job keeps some run's date (verify mode checks each loop meanwhile)
        job.loop_once()
        if job.facts.dates:
            break
    run_id = next(iter(job.facts.dates))
    job.facts.dates[run_id] -= 86400.0  # a wrong memory: the day before
    with pytest.raises(MemoryMismatch, match=f"run {run_id}: remembered date"):
        job.loop_once()
    job.shutdown()
