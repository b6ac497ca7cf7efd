"""`airflow.operators.datetime`."""

from ledger.branching import BranchDateTimeTask as BranchDateTimeOperator

__all__ = ["BranchDateTimeOperator"]
