"""`airflow.providers.smtp.operators`."""
