"""`airflow.providers.http.sensors`."""
