"""`airflow.providers.standard.sensors`."""

