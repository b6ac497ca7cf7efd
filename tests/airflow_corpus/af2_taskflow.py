"""Airflow 2 TaskFlow: @dag, @task with multiple_outputs and .override(), automatic task-id suffixes,
@task.bash, @task_group, params (DAG- and task-level, Param with title, ParamsDict) and XComArg."""

import pendulum
from airflow.decorators import dag, task, task_group
from airflow.models.param import Param, ParamsDict
from airflow.models.xcom_arg import XComArg
from airflow.operators.python import PythonOperator, get_current_context


@dag(
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    params=ParamsDict({"region": Param("eu", title="Region", description="where", enum=["eu", "us"]),
                       "limit": Param(5, type="integer", minimum=1, maximum=10)}),
    tags=["corpus"],
)
def af2_taskflow(greeting: str = "hi"):
    """TaskFlow in Airflow 2."""

    @task(multiple_outputs=True)
    def split(params=None):
        return {"region": params["region"], "count": params["limit"] * 2}

    @task
    def add(x: int, y: int) -> int:
        return x + y

    @task.bash
    def announce(region: str) -> str:
        return f"echo announcing {region} on {{{{ ds }}}}"

    @task_group
    def totals(n):
        first = add(n, 1)
        second = add(first, 10)  # called again in the group: task id add__1
        return second

    def use_task_params(params, **_):
        return f"{params['region']}-{params['mode']}"

    @task
    def context_check():
        context = get_current_context()
        return [context["ti"].task_id, context["dag_run"].run_id, context["params"]["limit"]]

    @task
    def greet(word):
        return word

    greet(greeting)  # the @dag function's parameter: a param, its value taken when the task runs
    parts = split()
    total = totals(parts["count"])
    doubled = add.override(task_id="doubled")(total, total)
    announce(parts["region"]) >> doubled
    own = PythonOperator(task_id="own_params", python_callable=use_task_params,
                         params={"mode": "fast", "region": "task-level"})
    XComArg(own) >> context_check()


af2_taskflow()
