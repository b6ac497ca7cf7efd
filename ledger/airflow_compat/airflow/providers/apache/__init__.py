"""`airflow.providers.apache`: Spark only (ledger/airflow_compat/spark.py)."""
