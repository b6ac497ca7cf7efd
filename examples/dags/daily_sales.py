"""A small daily pipeline: extract, then transform and check, then load."""

import pendulum

from ledger import DAG, BashTask, PythonTask, task


def transform(context):
    print(f"transforming {context.data_interval_start} .. {context.data_interval_end} (run {context.run_id})")


with DAG(
    "daily_sales",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
    end_date=pendulum.datetime(2024, 3, 7, tz="UTC"),
    catchup=True,
    default_args={"retries": 1, "depends_on_past": True},
) as dag:
    extract = BashTask("extract", 'echo "extracting $LEDGER_LOGICAL_DATE"')
    clean = PythonTask("transform", transform)

    @task
    def check(context):
        print(f"checking run {context.run_id}")

    load = BashTask("load", 'echo "loading $LEDGER_DATA_INTERVAL_START"')
    extract >> [clean, check()] >> load
