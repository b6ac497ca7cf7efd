from airflow.datasets import Dataset
from airflow.decorators import dag, task
from airflow.models import Variable
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.sqlite.hooks.sqlite import SqliteHook
from include.common import DEFAULT_ARGS, ORDERS, START, total


@dag(start_date=START, schedule=[Dataset(ORDERS)], default_args=DEFAULT_ARGS, catchup=False)
def report_orders():
    count = SQLExecuteQueryOperator(task_id="count", conn_id="warehouse_ro", sql="sql/check_orders.sql")

    @task(inlets=[Dataset(ORDERS)])
    def summarize(counted, inlet_events=None):
        rows = SqliteHook(sqlite_conn_id="warehouse").get_records("SELECT day, region, amount FROM orders")
        return {"rows": counted[0][0], "total": total(rows), "region": Variable.get("region"),
                "from": [e.source_dag_id for e in inlet_events[Dataset(ORDERS)]]}

    summarize(count.output)


report_orders()
