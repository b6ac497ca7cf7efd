"""`airflow.providers.standard.operators.branch`."""

from ledger.airflow_compat.flow import BaseBranchOperator

__all__ = ["BaseBranchOperator"]
