"""`airflow.operators.python`."""

from ledger.dag import PythonTask as PythonOperator

__all__ = ["PythonOperator"]
