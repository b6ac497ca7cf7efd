"""`airflow.providers.postgres.operators`."""
