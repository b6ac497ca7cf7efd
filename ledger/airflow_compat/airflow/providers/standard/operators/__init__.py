"""`airflow.providers.standard.operators`."""
