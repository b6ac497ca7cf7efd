"""`airflow.providers.standard.operators.python`."""

from ledger.airflow_compat.operators import PythonOperator, get_current_context

__all__ = ["PythonOperator", "get_current_context"]
