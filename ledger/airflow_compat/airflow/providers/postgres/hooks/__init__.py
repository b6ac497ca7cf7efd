"""`airflow.providers.postgres.hooks`."""
