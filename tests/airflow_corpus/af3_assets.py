"""Airflow 3.x style assets: a producer with outlets and a consumer scheduled on an asset."""

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, Asset, task

sales = Asset("sales_daily")

with DAG(dag_id="af3_asset_producer", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), schedule="@daily"):

    @task(outlets=[sales])
    def publish():
        return 42

    publish()

with DAG(dag_id="af3_asset_consumer", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), schedule=[sales]):
    BashOperator(task_id="use", bash_command="echo using sales")
