"""Airflow 3: airflow.sdk and the standard provider."""

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Label, Param, TaskGroup, chain, task


def shout(word):
    return word.upper()


with DAG(
    dag_id="af3_sdk",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    params={"word": Param("hello", type="string", title="Word")},
    description="Airflow 3 imports",
):
    begin = EmptyOperator(task_id="begin")
    loud = PythonOperator(task_id="loud", python_callable=shout, op_kwargs={"word": "{{ params.word }}"})

    @task
    def measure(text: str) -> int:
        return len(text)

    with TaskGroup("checks", default_args={"retries": 2}) as checks:
        size = measure(loud.output)
        echo = BashOperator(task_id="echo", bash_command="echo 'size {{ ti.xcom_pull(task_ids=\"checks.measure\") }}'")
        size >> echo
    chain(begin, Label("go"), loud, checks)
