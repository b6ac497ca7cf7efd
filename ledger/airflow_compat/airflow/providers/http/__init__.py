"""`airflow.providers.http`."""
