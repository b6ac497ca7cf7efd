"""`airflow.operators.dummy`."""

from ledger.airflow_compat.operators import DummyOperator, EmptyOperator

__all__ = ["DummyOperator", "EmptyOperator"]
