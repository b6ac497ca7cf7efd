"""Airflow 2: values between classic and TaskFlow tasks, as Airflow's XCom example passes them (a value pushed
while a template renders, a BashOperator's last line, pulls by key)."""

import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.operators.bash import BashOperator

with DAG("af2_xcom", schedule=None, start_date=pendulum.datetime(2021, 1, 1, tz="UTC"), catchup=False):
    bash_push = BashOperator(
        task_id="bash_push",
        bash_command='echo "bash_push demo" && '
        'echo "Manually set xcom value {{ ti.xcom_push(key="manually_pushed_value", value="manually_pushed_value") }}"'
        ' && echo "value_by_return"',
    )
    bash_pull = BashOperator(
        task_id="bash_pull",
        bash_command='echo "The xcom pushed manually is '
        '{{ ti.xcom_pull(task_ids="bash_push", key="manually_pushed_value") }}" && '
        'echo "The returned_value xcom is {{ ti.xcom_pull(task_ids="bash_push") }}"',
        do_xcom_push=False,
    )

    @task
    def pull_value_from_bash_push(ti=None):
        return [ti.xcom_pull(key="return_value", task_ids="bash_push"),
                ti.xcom_pull(task_ids="bash_push", key="manually_pushed_value"),
                ti.xcom_pull(task_ids="missing", default="fallback")]

    bash_push >> [bash_pull, pull_value_from_bash_push()]
