"""`airflow.utils.dates`."""

from ledger.airflow_compat.graph import days_ago

__all__ = ["days_ago"]
