"""`airflow.providers.apache.spark.decorators.pyspark`: `@task.pyspark` (ledger/airflow_compat/spark.py)."""

from ledger.airflow_compat.decorators import task as _task

pyspark_task = _task.pyspark

__all__ = ["pyspark_task"]
