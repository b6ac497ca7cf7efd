"""An import ledger does not provide: refused at parse time, in `ledger dags errors`."""

from airflow import DAG
from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator

with DAG("refused_provider", schedule=None):
    BigQueryInsertJobOperator(task_id="load", configuration={})
