"""`airflow.providers.standard.operators.datetime`."""

from ledger.airflow_compat.flow import BranchDateTimeOperator

__all__ = ["BranchDateTimeOperator"]
