"""`airflow.providers.http.operators`."""
