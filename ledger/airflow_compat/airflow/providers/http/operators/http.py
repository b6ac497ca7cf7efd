"""`airflow.providers.http.operators.http` (ledger/airflow_compat/http.py)."""

from ledger.airflow_compat.http import HttpOperator, SimpleHttpOperator

__all__ = ["HttpOperator", "SimpleHttpOperator"]
