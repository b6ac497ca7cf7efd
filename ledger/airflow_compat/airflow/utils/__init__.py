"""`airflow.utils`."""
