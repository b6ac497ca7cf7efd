"""`airflow.providers.smtp.operators.smtp`."""

from ledger.airflow_compat.operators import EmailOperator

__all__ = ["EmailOperator"]
