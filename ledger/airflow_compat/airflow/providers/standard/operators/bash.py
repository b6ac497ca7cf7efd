"""`airflow.providers.standard.operators.bash`."""

from ledger.airflow_compat.operators import BashOperator

__all__ = ["BashOperator"]
