"""`airflow.operators.python`."""

from ledger.branching import BranchPythonTask as BranchPythonOperator
from ledger.branching import ShortCircuitTask as ShortCircuitOperator
from ledger.dag import PythonTask as PythonOperator

__all__ = ["BranchPythonOperator", "PythonOperator", "ShortCircuitOperator"]
