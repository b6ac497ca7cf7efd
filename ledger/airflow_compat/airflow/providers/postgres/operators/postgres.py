"""`airflow.providers.postgres.operators.postgres` (ledger/airflow_compat/sql.py)."""

from ledger.airflow_compat.sql import PostgresOperator

__all__ = ["PostgresOperator"]
