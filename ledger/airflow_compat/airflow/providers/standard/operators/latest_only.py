"""`airflow.providers.standard.operators.latest_only`."""

from ledger.airflow_compat.operators import LatestOnlyOperator

__all__ = ["LatestOnlyOperator"]
