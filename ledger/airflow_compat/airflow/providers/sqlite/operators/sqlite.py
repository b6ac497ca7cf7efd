"""`airflow.providers.sqlite.operators.sqlite` (ledger/airflow_compat/sql.py)."""

from ledger.airflow_compat.sql import SqliteOperator

__all__ = ["SqliteOperator"]
