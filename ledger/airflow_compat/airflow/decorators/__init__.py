"""`airflow.decorators`."""

from ledger.airflow_compat.dag import airflow2_dag as dag
from ledger.airflow_compat.decorators import setup, task, task_group, teardown

__all__ = ["dag", "setup", "task", "task_group", "teardown"]
