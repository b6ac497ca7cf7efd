"""`airflow.providers.amazon.aws.operators`."""
