"""`airflow.providers.amazon.aws`."""
