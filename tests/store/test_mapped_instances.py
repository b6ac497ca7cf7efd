"""Mapped task instances in the database: a run's instances come from its version, expansion keeps the
unexpanded row as instance 0, one row per (run, task, map index), and values are kept per instance."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from ledger import DAG, BashTask, task
from ledger.core.states import RunType, TaskState
from ledger.models import Event, TaskInstance
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from ledger.store import runs as run_store
from ledger.store import tasks as task_store
from ledger.store import xcom as xcom_store
from tests.store.test_timeline_store import T0


def mapped_spec(session: Any, clock: Any) -> Any:
    with DAG("mapped", schedule="@daily", start_date=T0) as dag:
        @task
        def nums() -> list[int]:
            return [1, 2, 3]

        @task
        def double(x: int) -> int:
            return 2 * x

        double.expand(x=nums())
        BashTask.partial(task_id="echo").expand(bash_command=["echo a", "echo b"])
    dag.fileloc = "/dags/mapped.py"
    register_dag(session, dag, now=clock.now(), actor="test")
    return dag_store.current_spec(session, "mapped")


def new_run(session: Any, clock: Any, spec: Any, day: int = 0) -> Any:
    run = run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(T0.add(days=day)),
                                                           RunType.MANUAL), now=clock.now(), actor="test")
    session.flush()
    return run


def test_a_run_gets_one_instance_per_literal_value_and_one_waiting_row_for_an_upstream_list(
        session: Any, clock: Any) -> None:
    spec = mapped_spec(session, clock)
    run = new_run(session, clock, spec)
    rows = task_store.rows_for_runs(session, [run.id])[run.id]
    assert sorted(rows) == ["double", "echo[0]", "echo[1]", "nums"]
    assert rows["double"].map_index == -1 and rows["echo[1]"].map_index == 1
    expanded = session.scalars(select(Event).where(Event.kind == "task_expanded", Event.run_id == run.id)).all()
    assert [e.details for e in expanded] == [{"task_id": "echo", "count": 2, "source": "a literal list"}]
    many = run_store.splice_many(session, spec, [run_store.NewRun(spec.schedule.interval_for(T0.add(days=d)),
                                                                  RunType.BACKFILL) for d in (1, 2)],
                                 now=clock.now(), actor="test")
    assert all(sorted(task_store.rows_for_runs(session, many)[rid]) == ["double", "echo[0]", "echo[1]", "nums"]
               for rid in many)


def test_expansion_keeps_the_waiting_row_as_instance_zero_and_adds_the_others(session: Any, clock: Any) -> None:
    spec = mapped_spec(session, clock)
    run = new_run(session, clock, spec)
    waiting = task_store.rows_for_runs(session, [run.id])[run.id]["double"]
    task_store.expand(session, waiting, run.dag_id, 3)
    rows = task_store.rows_for_runs(session, [run.id])[run.id]
    assert [k for k in sorted(rows) if k.startswith("double")] == ["double[0]", "double[1]", "double[2]"]
    assert rows["double[0]"].id == waiting.id  # the same row: nothing it recorded is lost
    assert all(rows[f"double[{i}]"].state == TaskState.SCHEDULED for i in range(3))
    assert [ti.map_index for ti in task_store.instances(session, run.id, "double")] == [0, 1, 2]
    assert task_store.instance(session, run.id, "double", 2) is not None
    assert task_store.instance(session, run.id, "double") is None


def test_a_run_holds_one_row_per_task_and_map_index(session: Any, clock: Any) -> None:
    spec = mapped_spec(session, clock)
    run = new_run(session, clock, spec)
    with pytest.raises(IntegrityError), session.begin_nested():
        session.execute(insert(TaskInstance), [{"run_id": run.id, "dag_id": "mapped", "task_id": "echo",
                                                "map_index": 1, "state": "scheduled"}])


def test_values_are_kept_per_instance_and_listed_by_label(session: Any, clock: Any) -> None:
    spec = mapped_spec(session, clock)
    run = new_run(session, clock, spec)
    for i, value in ((1, 20), (0, 10)):
        xcom_store.record(session, [("return_value", value)], run_id=run.id, task_id="double", try_number=1,
                          now=clock.now(), map_index=i)
    xcom_store.record(session, [("return_value", [1, 2])], run_id=run.id, task_id="nums", try_number=1,
                      now=clock.now())
    assert xcom_store.values_for_runs(session, [run.id])[run.id] == {
        "double[0]": {"return_value": 10}, "double[1]": {"return_value": 20}, "nums": {"return_value": [1, 2]}}
    assert [x.value for x in xcom_store.for_task(session, run.id, "double", 1)] == [20]
    assert xcom_store.for_task(session, run.id, "double") == []
