"""`airflow.providers.amazon.aws.sensors`."""
