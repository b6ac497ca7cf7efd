"""`airflow.operators.python_operator` (Airflow 1's path, still valid in 2.10)."""

from ledger.airflow_compat.flow import BranchPythonOperator, ShortCircuitOperator
from ledger.airflow_compat.operators import PythonOperator
from ledger.airflow_compat.virtualenv import PythonVirtualenvOperator

__all__ = ["BranchPythonOperator", "PythonOperator", "PythonVirtualenvOperator", "ShortCircuitOperator"]
