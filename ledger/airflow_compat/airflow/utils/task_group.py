"""`airflow.utils.task_group`."""

from ledger.dag import TaskGroup

__all__ = ["TaskGroup"]
