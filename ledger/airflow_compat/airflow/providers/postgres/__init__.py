"""`airflow.providers.postgres`."""
