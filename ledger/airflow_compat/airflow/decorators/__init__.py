"""`airflow.decorators`."""

from ledger.branching import setup, teardown
from ledger.dag import task

__all__ = ["setup", "task", "teardown"]
