"""`airflow.providers.amazon.aws.hooks`."""
