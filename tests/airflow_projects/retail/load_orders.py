from airflow import DAG
from airflow.datasets import Dataset
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from include.common import DEFAULT_ARGS, ORDERS, START

with DAG("load_orders", start_date=START, end_date=START, schedule="@daily", catchup=True,
         default_args=DEFAULT_ARGS, tags=["retail"]):
    SQLExecuteQueryOperator(task_id="load", conn_id="warehouse", sql="sql/load_orders.sql",
                            split_statements=True, outlets=[Dataset(ORDERS)])
