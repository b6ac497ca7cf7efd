"""`airflow.utils.task_group`."""

from ledger.airflow_compat.operators import TaskGroup

__all__ = ["TaskGroup"]
