"""`airflow.operators.python`."""

from ledger.dag import PythonTask as PythonOperator
from ledger.python_envs import ExternalPythonTask as ExternalPythonOperator
from ledger.python_envs import PythonVirtualenvTask as PythonVirtualenvOperator
from ledger.python_envs import is_venv_installed

__all__ = ["ExternalPythonOperator", "PythonOperator", "PythonVirtualenvOperator", "is_venv_installed"]
