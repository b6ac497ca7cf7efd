"""Airflow 3: a DAG waiting for a task group of another DAG (ExternalTaskSensor with external_task_group_id), in
reschedule mode, until every task of the group has succeeded."""

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.sensors.external_task import ExternalTaskSensor
from airflow.sdk import DAG, TaskGroup

START = pendulum.datetime(2024, 3, 1, tz="UTC")

with DAG(dag_id="af3_group_producer", start_date=START, schedule="@once"):
    with TaskGroup("load") as load:
        quick = BashOperator(task_id="quick", bash_command="echo quick")
        with TaskGroup("slow"):
            BashOperator(task_id="table", bash_command="sleep 3 && echo table")
    load >> BashOperator(task_id="after_load", bash_command="echo after")

with DAG(dag_id="af3_group_consumer", start_date=START, schedule="@once"):
    ExternalTaskSensor(task_id="wait_for_load", external_dag_id="af3_group_producer", external_task_group_id="load",
                       mode="reschedule", poke_interval=1, timeout=120) >> BashOperator(task_id="report",
                                                                                         bash_command="echo report")
