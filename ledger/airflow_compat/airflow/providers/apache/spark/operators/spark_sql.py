"""`airflow.providers.apache.spark.operators.spark_sql` (ledger/airflow_compat/spark.py)."""

from ledger.airflow_compat.spark import SparkSqlOperator

__all__ = ["SparkSqlOperator"]
