"""`airflow.providers.standard.operators.datetime`."""

from ledger.branching import BranchDateTimeTask as BranchDateTimeOperator

__all__ = ["BranchDateTimeOperator"]
