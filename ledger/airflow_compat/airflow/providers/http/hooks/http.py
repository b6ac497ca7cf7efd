"""`airflow.providers.http.hooks.http` (ledger/airflow_compat/http.py)."""

from ledger.airflow_compat.http import HttpHook

__all__ = ["HttpHook"]
