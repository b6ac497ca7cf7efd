"""Airflow 2.x style: a custom timetable from the plugins folder (on PYTHONPATH)."""
import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator
from workday_timetable import WorkdayTimetable

with DAG(
    "af2_custom_timetable",
    schedule=WorkdayTimetable(skip_fridays=True),
    start_date=pendulum.datetime(2024, 1, 3, tz="UTC"),  # a Wednesday
    end_date=pendulum.datetime(2024, 1, 9, tz="UTC"),
    catchup=True,
):
    BashOperator(task_id="day", bash_command="echo {{ ds }}")
