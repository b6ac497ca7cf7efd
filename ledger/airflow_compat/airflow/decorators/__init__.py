"""`airflow.decorators`."""

from ledger.airflow_compat.dag import airflow2_dag as dag
from ledger.airflow_compat.decorators import task, task_group

__all__ = ["dag", "task", "task_group"]
