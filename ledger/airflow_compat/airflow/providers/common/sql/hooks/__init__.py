"""`airflow.providers.common.sql.hooks`."""
