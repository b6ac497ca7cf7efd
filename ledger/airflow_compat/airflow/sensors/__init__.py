"""`airflow.sensors`."""

