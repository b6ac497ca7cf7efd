"""`airflow.providers.apache.spark.operators.spark_submit` (ledger/airflow_compat/spark.py)."""

from ledger.airflow_compat.spark import SparkSubmitOperator

__all__ = ["SparkSubmitOperator"]
