"""`airflow.providers.common.sql.hooks.sql` (ledger/airflow_compat/sql.py)."""

from ledger.airflow_compat.sql import DbApiHook, fetch_all_handler, fetch_one_handler

__all__ = ["DbApiHook", "fetch_all_handler", "fetch_one_handler"]
