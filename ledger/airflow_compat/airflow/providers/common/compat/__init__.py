"""`airflow.providers.common.compat`: the common.compat provider (names that moved between Airflow 2 and 3)."""
