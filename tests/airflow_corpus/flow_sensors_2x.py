"""Airflow 2.x style sensors, in poke and reschedule mode and deferrable (ledger runs it unchanged)."""

import datetime
import os

import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.operators.bash import BashOperator
from airflow.sensors.base import PokeReturnValue
from airflow.sensors.bash import BashSensor
from airflow.sensors.date_time import DateTimeSensor
from airflow.sensors.filesystem import FileSensor
from airflow.sensors.python import PythonSensor
from airflow.sensors.time_delta import TimeDeltaSensorAsync
from airflow.sensors.weekday import DayOfWeekSensor
from airflow.utils.weekday import WeekDay


def flag_is_there(path):
    return os.path.exists(path)


with DAG(
    dag_id="flow_sensors_2x",
    start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
    schedule="@once",
    params={"flag": "flag-2x"},
    max_active_tasks=1,  # one slot: a sensor that held it while waiting would keep make_flag from running
    default_args={"retries": 1, "retry_delay": datetime.timedelta(seconds=0)},
) as dag:
    # highest priority: it takes the first slot, and in reschedule mode gives it back while it waits
    wait_for_flag = PythonSensor(task_id="wait_for_flag", python_callable=flag_is_there,
                                 op_kwargs={"path": "{{ params.flag }}"}, mode="reschedule", poke_interval=1,
                                 timeout=60, priority_weight=10)
    make_flag = BashOperator(task_id="make_flag", bash_command="sleep 1 && touch {{ params.flag }}")
    bash_sees_flag = BashSensor(task_id="bash_sees_flag", bash_command="test -e {{ params.flag }}",
                                poke_interval=1, timeout=60)
    file_sees_flag = FileSensor(task_id="file_sees_flag", filepath="{{ params.flag }}", poke_interval=1,
                                timeout=60, deferrable=True)
    never = FileSensor(task_id="never", filepath="/nonexistent/ledger-corpus/*", poke_interval=1, timeout=2,
                       mode="reschedule", soft_fail=True)
    past = TimeDeltaSensorAsync(task_id="past", delta=datetime.timedelta(seconds=-1))
    soon = DateTimeSensor(task_id="soon", target_time="{{ macros.datetime.utcnow().isoformat() }}",
                          poke_interval=1, timeout=30)
    any_day = DayOfWeekSensor(task_id="any_day", week_day=set(WeekDay), poke_interval=1, timeout=10)

    @task.sensor(poke_interval=1, timeout=30, mode="reschedule")
    def count_files(params=None):
        return PokeReturnValue(is_done=os.path.exists(params["flag"]), xcom_value="seen")

    @task
    def report(value):
        print(f"the sensor passed on {value!r}")

    make_flag >> bash_sees_flag  # poke mode holds its slot while it waits: after the flag's maker
    [wait_for_flag, bash_sees_flag, file_sees_flag] >> BashOperator(task_id="after_flag", bash_command="echo ok")
    [never, past, soon, any_day] >> BashOperator(task_id="after_time", bash_command="echo ok",
                                                 trigger_rule="none_failed")
    report(count_files())
