"""`airflow.providers.sqlite.hooks.sqlite` (ledger/airflow_compat/sql.py)."""

from ledger.airflow_compat.sql import SqliteHook

__all__ = ["SqliteHook"]
