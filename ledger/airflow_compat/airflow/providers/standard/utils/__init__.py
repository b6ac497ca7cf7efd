"""`airflow.providers.standard.utils`."""
