"""Airflow 3.x style: an EventsTimetable and a MultipleCronTriggerTimetable imported from airflow.sdk."""
import pendulum
from airflow.sdk import DAG, EventsTimetable, MultipleCronTriggerTimetable, task

with DAG(
    "af3_timetable_events",
    schedule=EventsTimetable([pendulum.datetime(2024, 3, 1, 18, tz="UTC"), pendulum.datetime(2024, 4, 1, 18, tz="UTC"),
                              pendulum.datetime(2024, 2, 1, 18, tz="UTC")], description="three matches"),
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=True,
):
    @task
    def when(data_interval_end=None):
        return data_interval_end.isoformat()

    when()

with DAG(
    "af3_timetable_multiple",
    schedule=MultipleCronTriggerTimetable("0 6 * * 1-5", "0 12 * * 6", timezone="UTC"),
    start_date=pendulum.datetime(2024, 1, 5, tz="UTC"),
    end_date=pendulum.datetime(2024, 1, 8, 6, tz="UTC"),
    catchup=True,
):
    @task
    def tick(data_interval_end=None):
        return data_interval_end.isoformat()

    tick()
