"""`airflow.providers.sqlite`."""
