"""Airflow 2.x style: branching, short-circuits, setup and teardown (ledger runs it unchanged)."""

import datetime

import pendulum
from airflow import DAG
from airflow.decorators import setup, task, teardown
from airflow.operators.bash import BashOperator
from airflow.operators.datetime import BranchDateTimeOperator
from airflow.operators.python import BranchPythonOperator, ShortCircuitOperator
from airflow.operators.weekday import BranchDayOfWeekOperator
from airflow.utils.weekday import WeekDay

with DAG(
    dag_id="flow_branching_2x",
    start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
    schedule="@once",
    catchup=False,
    params={"size": 3},
) as dag:
    pick = BranchPythonOperator(task_id="pick", python_callable=lambda: "left")
    left = BashOperator(task_id="left", bash_command="echo left")
    right = BashOperator(task_id="right", bash_command="echo right")
    after_right = BashOperator(task_id="after_right", bash_command="echo after_right")
    join = BashOperator(task_id="join", bash_command="echo join", trigger_rule="none_failed_min_one_success")
    pick >> [left, right]
    right >> after_right
    [left, after_right] >> join

    @task.branch
    def by_size(params=None):
        return "big" if params["size"] > 2 else ["small"]

    big = BashOperator(task_id="big", bash_command="echo big")
    small = BashOperator(task_id="small", bash_command="echo small")
    by_size() >> [big, small]

    in_march = BranchDateTimeOperator(
        task_id="in_march",
        follow_task_ids_if_true=["march"],
        follow_task_ids_if_false=["not_march"],
        target_lower=datetime.datetime(2024, 3, 1),
        target_upper=datetime.datetime(2024, 3, 31, 23, 59),
        use_task_logical_date=True,
    )
    in_march >> [BashOperator(task_id="march", bash_command="echo march"),
                 BashOperator(task_id="not_march", bash_command="echo not_march")]

    weekend = BranchDayOfWeekOperator(
        task_id="weekend_or_not",
        follow_task_ids_if_true="weekend",
        follow_task_ids_if_false="weekday",
        week_day={WeekDay.SATURDAY, WeekDay.SUNDAY},
        use_task_logical_date=True,
    )
    weekend >> [BashOperator(task_id="weekend", bash_command="echo weekend"),
                BashOperator(task_id="weekday", bash_command="echo weekday")]

    gate = ShortCircuitOperator(task_id="gate", python_callable=lambda: False,
                                ignore_downstream_trigger_rules=False)
    gated = BashOperator(task_id="gated", bash_command="echo gated")
    cleanup = BashOperator(task_id="cleanup", bash_command="echo cleanup", trigger_rule="all_done")
    gate >> gated >> cleanup

    @task.short_circuit
    def open_gate():
        return True

    open_gate() >> BashOperator(task_id="through_gate", bash_command="echo through")

    @setup
    def create_cluster():
        print("cluster created")

    @task
    def run_query():
        raise ValueError("the query failed")

    @teardown
    def delete_cluster():
        print("cluster deleted")

    created, deleted = create_cluster(), delete_cluster()
    created >> run_query() >> deleted
    created >> deleted
