"""`operators.python`."""

from ledger.airflow_compat.flow import BranchPythonOperator, ShortCircuitOperator
from ledger.airflow_compat.operators import PythonOperator, get_current_context

__all__ = ["BranchPythonOperator", "PythonOperator", "ShortCircuitOperator", "get_current_context"]
