"""`airflow.providers.standard.operators.bash`."""

from ledger.dag import BashTask as BashOperator

__all__ = ["BashOperator"]
