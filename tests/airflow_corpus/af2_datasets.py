"""Airflow 2.x style datasets: a producer task with outlets, a consumer scheduled on two datasets, and a
dataset-or-time schedule."""

import pendulum
from airflow import DAG
from airflow.datasets import Dataset
from airflow.decorators import task
from airflow.operators.bash import BashOperator
from airflow.timetables.datasets import DatasetOrTimeSchedule
from airflow.timetables.trigger import CronTriggerTimetable

orders = Dataset("s3://warehouse/orders")
refunds = Dataset("s3://warehouse/refunds")

with DAG("af2_dataset_producer", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), schedule="@daily"):
    BashOperator(task_id="write_orders", bash_command="echo orders", outlets=[orders])

    @task(outlets=[refunds])
    def write_refunds():
        return "refunds"

    write_refunds()

with DAG("af2_dataset_consumer", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), schedule=[orders, refunds]):
    BashOperator(task_id="read", bash_command="echo reading", inlets=[orders])

with DAG("af2_dataset_or_time", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         schedule=DatasetOrTimeSchedule(timetable=CronTriggerTimetable("0 6 * * *", timezone="UTC"),
                                        datasets=(orders | refunds))):
    BashOperator(task_id="report", bash_command="echo report")
