"""Airflow 2: TriggerDagRunOperator with conf and wait_for_completion, and the DAG it triggers."""

import pendulum
from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.utils.state import DagRunState


def receive(dag_run, params, **_):
    print(f"received {dag_run.conf} as a {dag_run.run_type} run")
    return dag_run.conf["number"] * 2


with DAG("af2_target", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         params={"number": 0}):
    PythonOperator(task_id="receive", python_callable=receive)

with DAG("af2_trigger", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    TriggerDagRunOperator(
        task_id="kick",
        trigger_dag_id="af2_target",
        conf={"number": 21},
        logical_date="{{ ds }}T12:00:00+00:00",
        wait_for_completion=True,
        poke_interval=0.2,
        allowed_states=[DagRunState.SUCCESS],
        failed_states=[DagRunState.FAILED],
    )
