"""`sla_miss_callback` as ledger calls it when the DAG's deadline (the largest task sla after the end of the data
interval) passes: Airflow 2's five arguments, made from the run's task states then (ledger/airflow_compat/dag.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum

from ledger.airflow_compat.dag import DAG, sla_misses
from ledger.airflow_compat.operators import EmptyOperator

SLAS = {"extract": timedelta(hours=1), "load": timedelta(hours=2)}


def test_the_tasks_not_succeeded_or_skipped_missed_their_sla_and_the_unsucceeded_ones_block() -> None:
    states = {"extract": "success", "load[0]": "success", "load[1]": "running", "notify": "skipped"}
    assert sla_misses(SLAS, states) == (["load"], [("load[1]", "running"), ("notify", "skipped")])
    assert sla_misses(SLAS, {"extract": "skipped", "load": "success"}) == ([], [("extract", "skipped")])
    assert sla_misses(SLAS, {}) == (["extract", "load"], [])  # no states known: each task with an sla


def test_the_callback_gets_airflows_arguments_for_the_runs_logical_date() -> None:
    called: list[tuple[Any, ...]] = []
    with DAG("sla_dag", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
             sla_miss_callback=lambda *args: called.append(args)) as dag:
        extract = EmptyOperator(task_id="extract", sla=timedelta(hours=1))
        extract >> EmptyOperator(task_id="load", sla=timedelta(hours=3))
    [callback] = dag.callbacks["deadline_missed"]
    callback({"logical_date": "2024-03-05T00:00:00+00:00", "run_id": 7, "deadline": "2024-03-06T03:00:00+00:00",
              "task_states": {"extract": "success", "load": "queued"}})
    [(got_dag, task_list, blocking_task_list, slas, blocking_tis)] = called
    assert got_dag is dag and task_list == "load on 2024-03-05T00:00:00+00:00"
    assert blocking_task_list == "load on 2024-03-05T00:00:00+00:00"
    assert [(s.task_id, s.dag_id, s.execution_date, s.run_id) for s in slas] == [
        ("load", "sla_dag", pendulum.datetime(2024, 3, 5, tz="UTC"), 7)]
    assert [(ti.task_id, ti.state) for ti in blocking_tis] == [("load", "queued")]
