"""`airflow.providers.apache.spark.operators`."""
