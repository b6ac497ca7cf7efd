"""`airflow.providers.standard.operators.empty`."""

from ledger.airflow_compat.operators import EmptyOperator

__all__ = ["EmptyOperator"]
