"""Airflow 3.x style (airflow.sdk, the standard provider): branching, short-circuits, setup and teardown."""

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.python import BranchPythonOperator, PythonOperator, ShortCircuitOperator
from airflow.providers.standard.operators.weekday import BranchDayOfWeekOperator
from airflow.sdk import DAG, task

with DAG(
    dag_id="flow_branching_3x",
    start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
    schedule="@once",
):
    pick = BranchPythonOperator(task_id="pick", python_callable=lambda: ["right"])
    left = BashOperator(task_id="left", bash_command="echo left")
    right = BashOperator(task_id="right", bash_command="echo right")
    join = BashOperator(task_id="join", bash_command="echo join", trigger_rule="none_failed_min_one_success")
    pick >> [left, right] >> join

    @task.branch
    def nothing():
        return None

    nothing() >> BashOperator(task_id="never", bash_command="echo never")

    weekday = BranchDayOfWeekOperator(
        task_id="friday_or_not",
        follow_task_ids_if_true="friday",
        follow_task_ids_if_false="other_day",
        week_day="Friday",
        use_task_logical_date=True,
    )
    weekday >> [BashOperator(task_id="friday", bash_command="echo friday"),
                BashOperator(task_id="other_day", bash_command="echo other_day")]

    gate = ShortCircuitOperator(task_id="gate", python_callable=lambda: [])
    gated = BashOperator(task_id="gated", bash_command="echo gated")
    finally_ = BashOperator(task_id="finally", bash_command="echo finally", trigger_rule="all_done")
    gate >> gated >> finally_

    create = BashOperator(task_id="create", bash_command="echo create")
    work = PythonOperator(task_id="work", python_callable=lambda: print("work done"))
    delete = BashOperator(task_id="delete", bash_command="exit 3")
    create >> work >> delete.as_teardown(setups=create)
