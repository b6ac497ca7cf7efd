"""A task's own concurrency limits, as Airflow's: `max_active_tis_per_dag` (its instances queued or running at once
over all its DAG's runs; Airflow 2's `task_concurrency`) and `max_active_tis_per_dagrun` (within one run: a mapped
task's instances). A job queues no try beyond them, counts what every job has queued or running, and keeps the
candidates it refused for the loops after; a DAG without them keeps its version hash."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pendulum
import pytest
from sqlalchemy import text

from ledger import DAG, BashTask
from ledger.core.errors import DagDefinitionError
from ledger.infra.clock import FixedClock
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.scheduler.loop.job import DagRunJob
from ledger.scheduler.loop.scheduling import create_due_runs
from ledger.sdk.describe import read_spec, version_of
from ledger.services.sync import register_dag
from ledger.store.backfills import task_limits_reached
from tests.scheduler.fakes import FakeExecutor
from tests.scheduler.test_database_faults import job_parts  # noqa: F401  (a fixture)

NOW = pendulum.datetime(2024, 3, 10, 12, tz="UTC")
START = pendulum.datetime(2024, 3, 1, tz="UTC")


def started_job(tmp_path: Path, parts: tuple[Any, Any], dag: DAG, *, runs: int, parallelism: int,
                **settings: Any) -> tuple[DagRunJob, FakeExecutor]:
    """A started job with `parallelism` fake slots (each try ends in the loop after it was queued), once `dag` is
    registered and its `runs` due runs are created; `settings`: SchedulerSettings other than the defaults."""
    engine, sessions = parts
    clock = FixedClock(NOW)
    dag.fileloc = str(tmp_path / f"{dag.dag_id}.py")
    with sessions.begin() as session:
        register_dag(session, dag, now=clock.now(), actor="test")
        assert len(create_due_runs(session, now=clock.now(), actor="test")) == runs
    (tmp_path / "logs").mkdir()
    executor = FakeExecutor(parallelism=parallelism)
    job = DagRunJob(sessions=sessions, engine=engine, executor=executor, clock=clock,
                    settings=replace(SchedulerSettings(), poll_interval=600.0, **settings),
                    actor="test", logs_folder=tmp_path / "logs", say=lambda _line: None)
    job.start()
    return job, executor


def active_by(sessions: Any, group: str, task_id: str) -> list[int]:
    """The task's instances queued or running now, grouped by `group` (a column of task_instance)."""
    with sessions() as s:
        return [int(n) for n in s.execute(text(
            f"SELECT count(*) FROM task_instance WHERE task_id = :t AND state IN ('queued', 'running') "
            f"GROUP BY {group}"), {"t": task_id}).scalars()]


def run_to_the_end(job: DagRunJob, executor: FakeExecutor, sessions: Any, task_id: str,
                   total: int) -> dict[str, int]:
    """Loop until every try ran (each fake try ends in the loop after the one that queued it); the most instances
    of `task_id` found queued or running at once after a loop, in one run and over the DAG."""
    most = {"run_id": 0, "dag_id": 0}
    for _ in range(100):
        job.loop_once()
        for group in most:
            most[group] = max(most[group], *active_by(sessions, group, task_id), 0)
        if len(executor.submitted) == total and not executor.in_flight():
            break
    job.shutdown()
    return most


def test_a_task_runs_at_most_max_active_tis_per_dag_instances_over_its_dags_runs(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    with DAG("one_at_a_time", schedule="@daily", start_date=START, end_date=START.add(days=3), catchup=True,
             max_active_runs=4) as dag:
        BashTask("load", "true", max_active_tis_per_dag=1) >> BashTask("after", "true")
    job, executor = started_job(tmp_path, job_parts, dag, runs=4, parallelism=4)
    job.loop_once()
    assert active_by(job_parts[1], "dag_id", "load") == [1]
    with job_parts[1]() as session:  # why the other runs wait, as a backfill's progress says it
        runs = dict(session.execute(text("SELECT id, version_hash FROM dag_run ORDER BY logical_date")).all())
        spec = read_spec(*version_of(dag))
        assert spec.version_hash in runs.values()
        reasons = task_limits_reached(session, {run_id: spec for run_id in runs})
    assert sorted(reasons) == sorted(runs)[1:]
    assert set(reasons.values()) == {"task load's max_active_tis_per_dag 1 reached"}
    most = run_to_the_end(job, executor, job_parts[1], "load", total=8)
    assert len(executor.submitted) == 8  # every run's two tries, none left waiting
    assert most["dag_id"] == 1  # with 4 slots free and 4 runs ready, one `load` at a time
    # `after` is not limited: the slots `load` could not take went to it
    assert [i.task_id for i in executor.submitted].count("load") == 4


def test_a_mapped_task_runs_at_most_max_active_tis_per_dagrun_instances_in_each_run(
        tmp_path: Path, job_parts: tuple[Any, Any]) -> None:  # noqa: F811
    with DAG("fan", schedule="@daily", start_date=START, end_date=START.add(days=1), catchup=True,
             max_active_runs=2) as dag:
        BashTask.partial(task_id="part", max_active_tis_per_dagrun=2).expand(bash_command=["true"] * 5)
    job, executor = started_job(tmp_path, job_parts, dag, runs=2, parallelism=8)
    most = run_to_the_end(job, executor, job_parts[1], "part", total=10)
    assert len(executor.submitted) == 10
    assert most["run_id"] == 2
    assert most["dag_id"] == 4  # a limit per run: both runs ran two each side by side


def test_the_limits_are_in_the_version_and_a_dag_without_them_keeps_its_hash() -> None:
    def make(**limits: int) -> DAG:
        with DAG("d", schedule="@daily", start_date=START) as dag:
            BashTask("a", "true", **limits) >> BashTask("b", "true")
        return dag

    plain_hash, plain_text = version_of(make())
    assert "max_active_tis" not in plain_text
    limited_hash, limited_text = version_of(make(max_active_tis_per_dag=2, max_active_tis_per_dagrun=1))
    assert limited_hash != plain_hash
    spec = read_spec(limited_hash, limited_text)
    assert spec.task_limits == {"a": (2, 1)}
    assert spec.tasks["a"].max_active_tis_per_dag == 2 and spec.tasks["b"].max_active_tis_per_dag is None
    assert read_spec(plain_hash, plain_text).task_limits == {}


def test_default_args_give_the_limits_to_every_task() -> None:
    with DAG("d", schedule="@daily", start_date=START, default_args={"max_active_tis_per_dag": 3}) as dag:
        BashTask("a", "true")
        BashTask("b", "true", max_active_tis_per_dag=1)
    spec = read_spec(*version_of(dag))
    assert spec.task_limits == {"a": (3, None), "b": (1, None)}


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_a_limit_that_is_not_a_whole_number_of_at_least_one_is_refused(value: Any) -> None:
    with DAG("d", schedule="@daily", start_date=START), \
            pytest.raises(DagDefinitionError, match="max_active_tis_per_dag must be a whole number >= 1"):
        BashTask("a", "true", max_active_tis_per_dag=value)


@pytest.mark.postgres
def test_on_postgresql_a_job_takes_the_limits_locks_in_one_order_before_it_queues(
        tmp_path: Path, migrated_postgres_url: str) -> None:
    from ledger.models import Pool
    from tests.conftest import sessions_on
    from tests.statements import statements_on

    engine, sessions = sessions_on(migrated_postgres_url)
    try:
        with sessions.begin() as session:
            session.add(Pool(name="p", slots=4, description=""))
        with DAG("locks", schedule="@daily", start_date=START, end_date=START.add(days=1), catchup=True,
                 max_active_runs=2) as dag:
            BashTask("load", "true", max_active_tis_per_dag=1, pool="p")
        job, executor = started_job(tmp_path, (engine, sessions), dag, runs=2, parallelism=4)
        with statements_on(engine) as statements:
            job.loop_once()
        job.shutdown()
        assert len(executor.submitted) == 1  # max_active_tis_per_dag
        classes = [s.split("pg_advisory_xact_lock(")[1].split(",")[0] for s in statements
                   if "pg_advisory_xact_lock(734" in s]
        assert classes == ["7341", "7343", "7345"]  # the DAG's, the task's, the pool's: every job in this order
        queued = next(i for i, s in enumerate(statements) if s.startswith("UPDATE task_instance SET state"))
        assert max(i for i, s in enumerate(statements) if "pg_advisory_xact_lock(734" in s) < queued
    finally:
        engine.dispose()
