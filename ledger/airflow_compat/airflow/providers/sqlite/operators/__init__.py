"""`airflow.providers.sqlite.operators`."""
