"""`airflow.utils.dag_parsing_context`."""

from ledger.airflow_compat.graph import get_parsing_context

__all__ = ["get_parsing_context"]
