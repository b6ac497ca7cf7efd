"""`airflow.operators.bash_operator` (Airflow 1's path, still valid in 2.10)."""

from ledger.airflow_compat.operators import BashOperator

__all__ = ["BashOperator"]
