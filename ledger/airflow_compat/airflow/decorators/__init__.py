"""`airflow.decorators`."""

from ledger.dag import task

__all__ = ["task"]
