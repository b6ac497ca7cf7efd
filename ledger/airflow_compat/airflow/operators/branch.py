"""`airflow.operators.branch`."""

from ledger.branching import BaseBranchTask as BaseBranchOperator

__all__ = ["BaseBranchOperator"]
