"""`airflow.providers.standard.operators.latest_only`."""

from ledger.airflow_compat.flow import LatestOnlyOperator

__all__ = ["LatestOnlyOperator"]
