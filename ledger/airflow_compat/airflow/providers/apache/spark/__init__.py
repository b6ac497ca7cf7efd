"""`airflow.providers.apache.spark` (ledger/airflow_compat/spark.py)."""
