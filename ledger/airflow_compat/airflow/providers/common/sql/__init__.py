"""`airflow.providers.common.sql`."""
