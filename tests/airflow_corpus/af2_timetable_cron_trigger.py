"""Airflow 2.x style: a CronTriggerTimetable in Berlin with a data interval, over the spring-forward night."""
from datetime import timedelta

import pendulum
from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.timetables.trigger import CronTriggerTimetable


def report(data_interval_start, data_interval_end):
    return [data_interval_start.isoformat(), data_interval_end.isoformat()]


with DAG(
    "af2_timetable_cron_trigger",
    schedule=CronTriggerTimetable("0 2 * * *", timezone="Europe/Berlin", interval=timedelta(hours=2)),
    start_date=pendulum.datetime(2024, 3, 29, tz="Europe/Berlin"),
    end_date=pendulum.datetime(2024, 4, 1, 12, tz="Europe/Berlin"),
    catchup=True,
):
    PythonOperator(task_id="report", python_callable=report)
