"""`airflow.providers.common`."""
