"""`airflow.providers.smtp.hooks`."""
