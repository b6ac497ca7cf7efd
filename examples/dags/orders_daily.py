"""examples/airflow/orders_daily.py for ledger: only its imports changed (docs/from-airflow.md)."""

from datetime import timedelta

import pendulum

from ledger import DAG, TaskGroup, task
from ledger import BashTask as BashOperator
from ledger import PythonTask as PythonOperator
from ledger.sdk.params import Param

default_args = {
    "owner": "data-eng",
    "retries": 2,
    "retry_delay": timedelta(seconds=1),
    "retry_exponential_backoff": True,
    "email": ["oncall@example.com"],
    "email_on_failure": False,
    "email_on_retry": False,
}


def check_quality(ti, params, ds, **_):
    rows = ti.xcom_pull(task_ids="load.count_rows")
    if rows < params["min_rows"]:
        raise ValueError(f"{ds}: only {rows} rows, fewer than {params['min_rows']}")
    print(f"{ds}: {rows} rows, quality ok")


with DAG(
    dag_id="orders_daily",
    schedule="0 6 * * *",
    start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
    catchup=False,
    default_args=default_args,
    params={"min_rows": Param(1, type="integer")},
    dagrun_timeout=timedelta(hours=2),
) as dag:
    extract = BashOperator(
        task_id="extract",
        bash_command="echo 'extracting orders of {{ ds }} into /tmp/orders_{{ ds_nodash }}.csv'",
    )

    with TaskGroup("load") as load:

        @task
        def count_rows(ds=None):
            return 40 + int(ds[-2:])

        @task
        def store(rows, params=None):
            return {"rows": rows, "min_rows": params["min_rows"]}

        store(count_rows())

    quality = PythonOperator(task_id="check_quality", python_callable=check_quality)
    cleanup = BashOperator(task_id="cleanup", bash_command="echo 'cleaning up {{ ds }}'", trigger_rule="all_done")

    @task
    def regions():
        return ["eu", "us"]

    @task
    def publish(region, fmt, ds=None):
        print(f"publishing the {fmt} orders of {ds} to {region}")
        return f"{region}/{ds}.{fmt}"

    archive = BashOperator.partial(task_id="archive", trigger_rule="all_done").expand(
        bash_command=["echo 'archiving part {{ ti.map_index }} of {{ ds }}'", "echo 'archiving the index'"]
    )

    extract >> load >> quality >> cleanup
    extract >> publish.partial(fmt="csv").expand(region=regions()) >> archive >> cleanup
