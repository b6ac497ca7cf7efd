"""`airflow.providers.standard.utils`."""

