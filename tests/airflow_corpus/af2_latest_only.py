"""Airflow 2: LatestOnlyOperator and trigger rules, as Airflow's example_latest_only_with_trigger, with catch-up:
the older run skips what follows latest_only, the latest runs everything. Its tasks' SLA (an hour after the end of
the data interval) has passed for the older run when it is created: sla_miss_callback is called for it."""

from datetime import timedelta

from airflow import DAG
from airflow.operators.empty import EmptyOperator
from airflow.operators.latest_only import LatestOnlyOperator
from airflow.utils.dates import days_ago
from airflow.utils.trigger_rule import TriggerRule


def sla_missed(dag, task_list, blocking_task_list, slas, blocking_tis):
    print(f"SLA missed in {dag.dag_id}: {task_list.splitlines()} blocked by {len(blocking_tis)} task instances")


with DAG(dag_id="af2_latest_only", schedule="@daily", start_date=days_ago(2), catchup=True,
         default_args={"sla": timedelta(hours=1)}, sla_miss_callback=sla_missed) as dag:
    latest_only = LatestOnlyOperator(task_id="latest_only")
    task1 = EmptyOperator(task_id="task1")
    task2 = EmptyOperator(task_id="task2")
    task3 = EmptyOperator(task_id="task3")
    task4 = EmptyOperator(task_id="task4", trigger_rule=TriggerRule.ALL_DONE)

    latest_only >> task1 >> [task3, task4]
    task2 >> [task3, task4]
