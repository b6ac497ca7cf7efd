"""`airflow.providers.postgres.hooks.postgres` (ledger/airflow_compat/sql.py)."""

from ledger.airflow_compat.sql import PostgresHook

__all__ = ["PostgresHook"]
