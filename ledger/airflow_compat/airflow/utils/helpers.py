"""`airflow.utils.helpers`."""

from ledger.airflow_compat.graph import chain, cross_downstream

__all__ = ["chain", "cross_downstream"]
