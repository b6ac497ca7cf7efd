"""`airflow.providers.http.hooks`."""
