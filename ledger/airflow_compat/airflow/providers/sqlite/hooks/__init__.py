"""`airflow.providers.sqlite.hooks`."""
