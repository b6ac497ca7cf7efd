"""`airflow.providers.common.sql.operators`."""
