"""Airflow 3.x style sensors (airflow.sdk, airflow.providers.standard.sensors.*)."""

import datetime
import os

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.sensors.bash import BashSensor
from airflow.providers.standard.sensors.python import PythonSensor
from airflow.providers.standard.sensors.time import TimeSensorAsync
from airflow.providers.standard.sensors.time_delta import TimeDeltaSensor
from airflow.sdk import DAG, PokeReturnValue, task

with DAG(
    dag_id="flow_sensors_3x",
    start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
    schedule="@once",
    params={"flag": "flag-3x"},
):
    wait = PythonSensor(task_id="wait", python_callable=lambda path: os.path.exists(path),
                        op_kwargs={"path": "{{ params.flag }}"}, deferrable=True, poke_interval=1, timeout=60,
                        priority_weight=10)
    make = BashOperator(task_id="make", bash_command="sleep 1 && touch {{ params.flag }}")
    # its timeout fails it at once: no retry is spent on a sensor that timed out
    BashSensor(task_id="hard", bash_command="exit 1", poke_interval=1, timeout=1, retries=3,
                      mode="reschedule")
    midnight = TimeSensorAsync(task_id="midnight", target_time=datetime.time(0, 0))
    later = TimeDeltaSensor(task_id="later", delta=datetime.timedelta(0), mode="reschedule")

    @task.sensor(poke_interval=1, timeout=30)
    def flag_size(params=None):
        found = os.path.exists(params["flag"])
        return PokeReturnValue(is_done=found, xcom_value=os.path.getsize(params["flag"]) if found else None)

    wait >> BashOperator(task_id="after", bash_command="echo after")
    [midnight, later] >> BashOperator(task_id="after_time", bash_command="echo ok")
    make >> flag_size()  # poke mode holds its slot while it waits: after the flag's maker
