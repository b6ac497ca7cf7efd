"""Airflow 2: a setup, the work and its teardown; the work fails on 2024-03-01 and depends on its past, so that the
next runs wait there with their setups done: an operator then marks such a run, and its teardown still runs."""

import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator

with DAG("af2_teardown_mark", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
    create_cluster = BashOperator(task_id="create_cluster", bash_command="echo 'cluster for {{ ds }}'")
    run_query = BashOperator(task_id="run_query", bash_command="test {{ ds }} != 2024-03-01",
                             depends_on_past=True)
    delete_cluster = BashOperator(task_id="delete_cluster", bash_command="echo 'deleting the cluster of {{ ds }}'")
    create_cluster >> run_query >> delete_cluster.as_teardown(setups=create_cluster)
