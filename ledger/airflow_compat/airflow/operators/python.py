"""`airflow.operators.python`."""

from ledger.airflow_compat.flow import BranchPythonOperator, ShortCircuitOperator
from ledger.airflow_compat.operators import PythonOperator, get_current_context
from ledger.airflow_compat.virtualenv import (
    BranchExternalPythonOperator,
    BranchPythonVirtualenvOperator,
    ExternalPythonOperator,
    PythonVirtualenvOperator,
)
from ledger.sdk.python_envs import is_venv_installed

__all__ = ["BranchExternalPythonOperator", "BranchPythonOperator", "BranchPythonVirtualenvOperator",
           "ExternalPythonOperator", "PythonOperator", "PythonVirtualenvOperator",
           "ShortCircuitOperator", "get_current_context", "is_venv_installed"]
