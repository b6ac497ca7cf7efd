"""`airflow.operators.email`."""

from ledger.airflow_compat.operators import EmailOperator

__all__ = ["EmailOperator"]
